//! The kernel ABI adapter as a device holds it: what it declared at open
//! (validated there), where its regions lie in each slot's one region
//! allocation ([`RegionLayout`]: the regions zeroed before a run coalesced
//! into as few memsets as they allow, the two records read back with one
//! copy when they lie close), and the host buffers a slot's run is built
//! in ([`SlotHost`]).

use super::{MAX_BLOCK, MAX_REGIONS};
use crate::contract::config::{ConfigError, DeviceConfig, Resolved};
use crate::contract::error::ErrorKind;
use crate::driver::abi::{
    AbiError, BlockBuf, KernelAbiRef, LaunchArgs, Prep, RecordAt, RegionSpec, Shape, TensorView,
    WorkArgs,
};

/// The kernel ABI adapter of a device, with what it declared at open
/// (validated there).
pub(super) struct Abi {
    pub(super) get: KernelAbiRef,
    pub(super) regions: Vec<RegionSpec>,
    pub(super) status: RecordAt,
    pub(super) timing: RecordAt,
    /// `max_block_bytes`, as checked (asked once).
    pub(super) max_block: usize,
    /// Where the regions lie in a slot's region allocation.
    pub(super) layout: RegionLayout,
}

impl Abi {
    /// Asks the adapter for its regions and records and checks them.
    pub(super) fn declare(
        get: KernelAbiRef,
        config: &Resolved,
        depth: usize,
    ) -> Result<Self, ConfigError> {
        let adapter = get.name();
        let bad = |what| ConfigError::Adapter {
            adapter,
            error: AbiError::Unsupported { what },
        };
        let abi = get.get();
        // Asked once each, through the unwind guard: a panic here is the
        // adapter refusing the device.
        let declared = adapter_call(0, || {
            let mut regions = Vec::new();
            let r = abi.regions(&Shape::new(config.block_dim, depth), &mut regions);
            (
                r.map(|()| regions),
                abi.status_record(),
                abi.timing_record(),
                abi.max_block_bytes(),
            )
        });
        let (regions, status, timing, max_block) =
            declared.map_err(|error| ConfigError::Adapter { adapter, error })?;
        let regions = regions.map_err(|error| ConfigError::Adapter { adapter, error })?;
        if regions.is_empty() || regions.len() > MAX_REGIONS {
            return Err(bad("an adapter declares 1 to 8 regions"));
        }
        if regions
            .iter()
            .any(|r| r.bytes == 0 || r.bytes > DeviceConfig::MAX_STAGING)
        {
            return Err(bad("a region is 0 bytes or above 4 GiB"));
        }
        for rec in [status, timing] {
            let inside = regions.get(rec.region).is_some_and(|r| {
                rec.bytes > 0
                    && rec
                        .offset
                        .checked_add(rec.bytes)
                        .is_some_and(|e| e <= r.bytes)
            });
            if !inside {
                return Err(bad("a record lies outside its region or is empty"));
            }
        }
        if max_block == 0 || max_block > MAX_BLOCK {
            return Err(bad("max_block_bytes is 0 or above 1 MiB"));
        }
        let layout = RegionLayout::of(&regions, status, timing)
            .ok_or_else(|| bad("the regions overflow one allocation"))?;
        Ok(Abi {
            get,
            regions,
            status,
            timing,
            max_block,
            layout,
        })
    }

    /// Bytes of the host buffer records are armed and read through: the
    /// largest armed region or record, or an image of the prepared span
    /// (or the records) with up to [`RegionLayout::JOINT_DATA`] bytes of
    /// arena data after it.
    fn scratch_bytes(&self) -> usize {
        let armed = self
            .regions
            .iter()
            .filter(|r| r.prep == Prep::Armed)
            .map(|r| r.bytes);
        let joint = [self.layout.arm, self.layout.joint]
            .into_iter()
            .flatten()
            .map(|(_, bytes)| bytes + RegionLayout::JOINT_DATA);
        armed
            .chain([self.status.bytes, self.timing.bytes])
            .chain(joint)
            .max()
            .unwrap_or(0)
    }
}

/// The host side of one slot's run (see `Device::blocks`).
pub(super) struct SlotHost {
    pub(super) aicore: BlockBuf,
    pub(super) aicpu: BlockBuf,
    /// The AICPU kernel receives the AICore block.
    pub(super) shared: bool,
    pub(super) tensors: Vec<TensorView>,
    pub(super) scalars: Vec<u64>,
    pub(super) scratch: Vec<u8>,
}

impl SlotHost {
    /// The blocks the adapter wrote last: the AICore kernel's and the
    /// AICPU kernel's (the same one when it said so).
    pub(super) fn args(&self) -> (LaunchArgs<'_>, LaunchArgs<'_>) {
        let core = self.aicore.args();
        (core, if self.shared { core } else { self.aicpu.args() })
    }

    /// One slot's host buffers, sized for `abi`; a failed host allocation
    /// is an error, never an abort.
    pub(super) fn new(abi: &Abi) -> Result<Self, ErrorKind> {
        let max = abi.max_block;
        let fields = WorkArgs::MAX_TENSORS + 2 * MAX_REGIONS;
        let oom = |bytes| ErrorKind::HostOutOfMemory { bytes };
        let block = || {
            BlockBuf::try_with_capacity(max, fields).ok_or(oom(
                max + fields * size_of::<crate::driver::abi::AddrField>()
            ))
        };
        let mut tensors = Vec::new();
        tensors
            .try_reserve_exact(WorkArgs::MAX_TENSORS)
            .map_err(|_| oom(WorkArgs::MAX_TENSORS * size_of::<TensorView>()))?;
        let mut scalars = Vec::new();
        scalars
            .try_reserve_exact(WorkArgs::MAX_SCALARS)
            .map_err(|_| oom(WorkArgs::MAX_SCALARS * 8))?;
        let n = abi.scratch_bytes();
        let mut scratch = Vec::new();
        scratch.try_reserve_exact(n).map_err(|_| oom(n))?;
        scratch.resize(n, 0);
        Ok(SlotHost {
            aicore: block()?,
            aicpu: block()?,
            shared: false,
            tensors,
            scalars,
            scratch,
        })
    }
}

/// Where an adapter's regions lie in a slot's one region allocation, in
/// declaration order, each at a multiple of [`RegionLayout::ALIGN`]; the
/// regions zeroed before each run, coalesced (with the padding between
/// them) into as few ranges as they allow — one memset each — and, when
/// the status and timing records lie within [`RegionLayout::JOINT_READ`]
/// bytes of each other, the one range that reads both back.
#[derive(Debug, Clone, Copy)]
pub(super) struct RegionLayout {
    offsets: [usize; MAX_REGIONS],
    /// Bytes of the allocation.
    pub(super) bytes: usize,
    zeroes: [(usize, usize); MAX_REGIONS],
    zero_runs: usize,
    /// `(offset, bytes)` of one read covering both records.
    pub(super) joint: Option<(usize, usize)>,
    /// `(offset, bytes)` from the first region the host prepares (zeroed
    /// or armed) to the end of the allocation, when no stamped region lies
    /// in it and it is at most [`RegionLayout::ARM_IMAGE`] bytes: the host
    /// prepares all of them with one copy of an image of that span, which
    /// the slot's arena input (right after it) may extend.
    pub(super) arm: Option<(usize, usize)>,
}

impl RegionLayout {
    /// Each region starts at a multiple of this.
    pub(super) const ALIGN: usize = 64;
    /// The records are read with one copy when both lie in this many bytes.
    pub(super) const JOINT_READ: usize = 128;
    /// The regions are prepared from one host image when their span is at
    /// most this many bytes (else with a memset per zeroed run and a copy
    /// per armed region).
    pub(super) const ARM_IMAGE: usize = 4 << 10;
    /// A run's arena input (output) of at most this many bytes travels in
    /// the one copy that prepares the regions (that reads the records
    /// back, for a replay): a runtime call saved is worth a host copy of
    /// this size, not of more.
    pub(super) const JOINT_DATA: usize = 16 << 10;

    /// The layout of `regions` (checked sizes: `None` on overflow).
    fn of(regions: &[RegionSpec], status: RecordAt, timing: RecordAt) -> Option<Self> {
        let mut layout = RegionLayout {
            offsets: [0; MAX_REGIONS],
            bytes: 0,
            zeroes: [(0, 0); MAX_REGIONS],
            zero_runs: 0,
            joint: None,
            arm: None,
        };
        let mut at = 0usize;
        // Where the prepared span begins: the first zeroed or armed region
        // after the last stamped one (none: every region is stamped).
        let mut arm_from = None;
        // A run of zeroed regions being extended: (start, end).
        let mut run: Option<(usize, usize)> = None;
        for (i, r) in regions.iter().enumerate().take(MAX_REGIONS) {
            layout.offsets[i] = at;
            let end = at.checked_add(r.bytes)?;
            if r.prep == Prep::Zeroed {
                run = Some(run.map_or((at, end), |(s, _)| (s, end)));
            } else if let Some((s, e)) = run.take() {
                layout.push_zero(s, e);
            }
            if r.prep == Prep::Stamped {
                arm_from = None;
            } else {
                arm_from = arm_from.or(Some(at));
            }
            at = end.checked_next_multiple_of(Self::ALIGN)?;
        }
        if let Some((s, e)) = run {
            layout.push_zero(s, e);
        }
        layout.bytes = at.max(Self::ALIGN);
        // One image only when every prepared region is in the span.
        let prepared = regions.iter().take(MAX_REGIONS).enumerate();
        let all_in = |from: usize| {
            prepared
                .clone()
                .all(|(i, r)| r.prep == Prep::Stamped || layout.offsets[i] >= from)
        };
        layout.arm = arm_from
            .filter(|&from| all_in(from) && layout.bytes - from <= Self::ARM_IMAGE)
            .map(|from| (from, layout.bytes - from));
        let range = |r: RecordAt| {
            let start = layout.offsets.get(r.region)?.checked_add(r.offset)?;
            Some((start, start.checked_add(r.bytes)?))
        };
        let ((s0, e0), (s1, e1)) = (range(status)?, range(timing)?);
        let (start, end) = (s0.min(s1), e0.max(e1));
        if end - start <= Self::JOINT_READ {
            layout.joint = Some((start, end - start));
        }
        Some(layout)
    }

    fn push_zero(&mut self, start: usize, end: usize) {
        self.zeroes[self.zero_runs] = (start, end - start);
        self.zero_runs += 1;
    }

    /// Region `i`'s offset in the allocation.
    pub(super) fn offset(&self, i: usize) -> usize {
        self.offsets.get(i).copied().unwrap_or(0)
    }

    /// The ranges zeroed before each run: `(offset, bytes)`.
    pub(super) fn zeroes(&self) -> &[(usize, usize)] {
        &self.zeroes[..self.zero_runs]
    }

    /// The record `r` at its offset in the allocation.
    pub(super) fn record(&self, r: RecordAt) -> usize {
        self.offset(r.region) + r.offset
    }
}

/// Calls into the adapter: a panic there (the adapter's bug) fails this
/// run — nothing submitted, or the record refused — instead of unwinding
/// through the device's bookkeeping.
///
/// While a device's user adapter runs, its thread is marked with the
/// device: a call back into that device from inside it (its state lock
/// may be held) panics there — caught here, failing the run — instead of
/// deadlocking. `device` 0: no device yet (at open).
pub(super) fn adapter_call<T>(device: u64, f: impl FnOnce() -> T) -> Result<T, AbiError> {
    let outer = IN_ADAPTER.with(|a| a.replace(device));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    IN_ADAPTER.with(|a| a.set(outer));
    r.map_err(|_| AbiError::Unsupported {
        what: "the kernel ABI adapter panicked (or called its device)",
    })
}

thread_local! {
    /// The device whose user adapter runs on this thread (0: none; see
    /// `adapter_call`). `Copy` data, no destructor: always accessible.
    static IN_ADAPTER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// `true` while device `device`'s user adapter runs on this thread.
pub(super) fn in_adapter_of(device: u64) -> bool {
    IN_ADAPTER.with(std::cell::Cell::get) == device
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(bytes: usize, prep: Prep) -> RegionSpec {
        RegionSpec {
            name: "r",
            bytes,
            prep,
        }
    }

    #[test]
    fn adjacent_zeroed_regions_are_one_memset_and_close_records_one_read() {
        // runclaim's: handshake (zeroed), wall (zeroed), status (armed).
        let regions = [
            region(104, Prep::Zeroed),
            region(48, Prep::Zeroed),
            region(16, Prep::Armed),
        ];
        let status = RecordAt {
            region: 2,
            offset: 0,
            bytes: 16,
        };
        let wall = RecordAt {
            region: 1,
            offset: 0,
            bytes: 48,
        };
        let l = RegionLayout::of(&regions, status, wall).unwrap();
        assert_eq!((l.offset(0), l.offset(1), l.offset(2)), (0, 128, 192));
        assert_eq!(
            l.zeroes(),
            &[(0, 176)],
            "the handshake, the padding and the wall"
        );
        assert_eq!(l.joint, Some((128, 80)));
        assert_eq!(l.bytes, 256);
        assert_eq!(l.arm, Some((0, 256)), "one image prepares all three");
        // A stamped region between two zeroed ones splits the run; records
        // far apart are read apart.
        let regions = [
            region(8, Prep::Zeroed),
            region(1000, Prep::Stamped),
            region(8, Prep::Zeroed),
        ];
        let a = RecordAt {
            region: 0,
            offset: 0,
            bytes: 8,
        };
        let b = RecordAt {
            region: 2,
            offset: 0,
            bytes: 8,
        };
        let l = RegionLayout::of(&regions, a, b).unwrap();
        assert_eq!(l.zeroes(), &[(0, 8), (1088, 8)]);
        assert_eq!(l.joint, None);
        assert_eq!(l.arm, None, "a stamped region inside the span");
        // Stamped first, then prepared: the image starts after it; all
        // stamped (a2a3's): no image; a span too large for one: none.
        let tail = [region(8, Prep::Stamped), region(8, Prep::Armed)];
        assert_eq!(RegionLayout::of(&tail, a, a).unwrap().arm, Some((64, 64)));
        let stamped = [region(8, Prep::Stamped)];
        assert_eq!(RegionLayout::of(&stamped, a, a).unwrap().arm, None);
        let big = [region(RegionLayout::ARM_IMAGE + 1, Prep::Zeroed)];
        assert_eq!(RegionLayout::of(&big, a, a).unwrap().arm, None);
        // Sizes that overflow are refused.
        let huge = [region(usize::MAX, Prep::Stamped), region(8, Prep::Zeroed)];
        assert!(RegionLayout::of(&huge, a, a).is_none());
    }
}
