//! A run's arguments as the device reads them: each tensor's [`Data`], the
//! lists a [`Workload`](super::Workload) keeps them in (`arg_list.rs`), and
//! [`Args`] — the one view the device's prepare and finalize take, of a
//! workload's arguments or of a [`RunSpec`](crate::RunSpec) lowered into
//! two tensors ([`lowered`]).

use std::any::{Any, TypeId};
use std::sync::Arc;

use bytemuck::Pod;

use super::super::buffer::{BufferCore, SlotCores};
use super::super::error::{BufferId, ErrorKind};
pub(crate) use super::arg_list::{ArgList, INLINE_SCALARS, INLINE_TENSORS, Parts, PartsMut};
use crate::driver::abi::{Dir, WorkArgs};

/// Where a tensor's bytes are.
pub(crate) enum Data<'a> {
    /// A host tensor the kernel only reads: copied in at prepare.
    HostIn(&'a [u8]),
    /// A host tensor the kernel writes ([`Dir::Out`] or [`Dir::InOut`]):
    /// borrowed by the run until finalize, copied back then.
    HostOut(&'a mut [u8]),
    /// A host tensor the workload owns (a pipeline's: it moves in with the
    /// workload and comes back with it), staged like the borrowed ones:
    /// the index of its buffer in the workload's owned list.
    Owned(usize),
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
    /// A range of a device buffer the workload holds a share of (an
    /// `Arc`): the index of its share in the workload's held list.
    Held {
        index: usize,
        offset: usize,
        bytes: usize,
    },
    /// A [`RunSpec`](crate::RunSpec) run's input: `u32` elements copied
    /// into the slot's arena input region at prepare.
    ArenaIn(&'a [u8]),
    /// A [`RunSpec`](crate::RunSpec) run's input chained on the run
    /// launched just before it: that run's arena output, fixed at launch.
    Chained,
    /// A [`RunSpec`](crate::RunSpec) run's output: the slot's arena output
    /// region (as many elements as the input), copied back at finalize
    /// into this buffer (empty at prepare: the buffer is given then).
    ArenaOut(&'a mut [u8]),
}

/// `size_of`, `align_of` and the identity of an element type.
#[derive(Clone, Copy)]
pub(crate) struct Elem {
    pub size: u32,
    pub align: u32,
    id: fn() -> TypeId,
}

impl Elem {
    #[inline]
    pub(crate) fn of<T: Pod>() -> Self {
        Elem {
            size: u32::try_from(size_of::<T>()).unwrap_or(u32::MAX),
            align: u32::try_from(align_of::<T>()).unwrap_or(u32::MAX),
            id: TypeId::of::<T>,
        }
    }

    /// `true` when the element type is `T`.
    pub(crate) fn is<T: Pod>(&self) -> bool {
        (self.id)() == TypeId::of::<T>()
    }
}

/// One tensor argument.
pub(crate) struct Tensor<'a> {
    pub data: Data<'a>,
    pub dir: Dir,
    pub elem: Elem,
    /// A staged host tensor's offset in the slot's staging region, fixed
    /// when the run is prepared (finalize copies back from there).
    pub at: usize,
}

impl<'a> Tensor<'a> {
    #[inline]
    pub(crate) fn new(data: Data<'a>, dir: Dir, elem: Elem) -> Self {
        Tensor {
            data,
            dir,
            elem,
            at: 0,
        }
    }

    /// Bytes the host side of the tensor holds (a device buffer's span; an
    /// arena tensor's host buffer, which the run's length bounds).
    pub(crate) fn bytes(&self, owned: &[Box<dyn OwnedHost>]) -> usize {
        match &self.data {
            Data::HostIn(b) | Data::ArenaIn(b) => b.len(),
            Data::HostOut(b) | Data::ArenaOut(b) => b.len(),
            Data::Owned(i) => owned.get(*i).map_or(0, |o| o.bytes().len()),
            Data::Scratch { core, .. } => core.bytes,
            Data::PerSlot(set) => set.bytes(),
            Data::Device { bytes, .. } | Data::Held { bytes, .. } => *bytes,
            Data::Chained => 0,
        }
    }

    /// The buffer the tensor binds, if any (`held`: the workload's shared
    /// buffers): what a launch marks with the run that binds it.
    #[inline]
    pub(crate) fn bound_core<'x>(
        &'x self,
        slot: usize,
        held: &'x [Arc<dyn HeldBuffer>],
    ) -> Option<&'x BufferCore> {
        match self.data {
            Data::Device { core, .. } | Data::Scratch { core, .. } => Some(core),
            Data::PerSlot(set) => set.core(slot),
            Data::Held { index, .. } => held.get(index).map(|b| b.core()),
            _ => None,
        }
    }
}

/// A device buffer a workload holds a share of (`Arc<DeviceBuffer<T>>`),
/// its element type erased.
pub(crate) trait HeldBuffer: Send + Sync {
    fn core(&self) -> &BufferCore;
}

impl<T: Pod> HeldBuffer for super::super::buffer::DeviceBuffer<T> {
    fn core(&self) -> &BufferCore {
        super::super::buffer::DeviceBuffer::core(self)
    }
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

/// Something wrong with a workload, found while it was built and reported
/// when a run is prepared from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flaw {
    BufferRange {
        tensor: usize,
        buffer: BufferId,
        len: usize,
    },
}

impl Flaw {
    pub(crate) fn kind(self) -> ErrorKind {
        match self {
            Flaw::BufferRange {
                tensor,
                buffer,
                len,
            } => ErrorKind::BufferRange {
                tensor,
                buffer,
                len,
            },
        }
    }
}

/// A run's arguments, as the device's one prepare and one finalize read
/// them: the tensors in order (the device fixes each staged tensor's
/// offset at prepare and reads it at finalize), the owned host buffers
/// they name, the scalars, and the first flaw found while they were built.
pub(crate) struct Args<'x, 'a> {
    pub tensors: PartsMut<'x, Tensor<'a>>,
    pub owned: &'x mut [Box<dyn OwnedHost>],
    pub held: &'x [Arc<dyn HeldBuffer>],
    pub scalars: Parts<'x, u64>,
    pub flaw: Option<Flaw>,
}

impl Args<'_, '_> {
    /// What is wrong with the arguments as a whole, if anything: the first
    /// flaw found while they were built, then the limits.
    pub(crate) fn check(&self) -> Result<(), ErrorKind> {
        if let Some(flaw) = self.flaw {
            return Err(flaw.kind());
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

/// A [`RunSpec`](crate::RunSpec) run as the two tensors of a workload:
/// tensor 0 its input (`input`: the host elements, or [`Data::Chained`]),
/// tensor 1 the slot's arena output, copied back into `output` at finalize
/// (empty at prepare). `u32` elements; no scalars.
#[inline]
pub(crate) fn lowered<'a>(input: Data<'a>, output: &'a mut [u8]) -> [Tensor<'a>; 2] {
    let elem = Elem::of::<u32>();
    [
        Tensor::new(input, Dir::In, elem),
        Tensor::new(Data::ArenaOut(output), Dir::Out, elem),
    ]
}

/// The [`Args`] of a lowered run (see [`lowered`]).
#[inline]
pub(crate) fn lowered_args<'x, 'a>(tensors: &'x mut [Tensor<'a>; 2]) -> Args<'x, 'a> {
    Args {
        tensors: PartsMut::spilled(tensors),
        owned: &mut [],
        held: &[],
        scalars: Parts::EMPTY,
        flaw: None,
    }
}

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
        let align = u64::from(align).max(crate::DeviceConfig::STAGING_ALIGN as u64);
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

    #[test]
    fn an_element_knows_its_type() {
        let e = Elem::of::<f32>();
        assert!(e.is::<f32>());
        assert!(!e.is::<u32>(), "same size, another type");
        assert_eq!((e.size, e.align), (4, 4));
    }
}
