//! What opening a device builds: its streams, every slot's regions and
//! events, and its host buffers, under a drop guard ([`Building`]) that
//! releases what was made on every way out but success; then the device
//! assembled from them. (`Device::open`, which validates the configuration
//! first, is `mod.rs`'s.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::abi::{Abi, SlotHost};
use super::state::State;
use super::{Device, MAX_REGIONS, NEXT_DEVICE_ID, SlotRegions, look};
use crate::contract::buffer::SharedLedger;
use crate::contract::config::{DeviceConfig, Resolved};
use crate::contract::error::ErrorKind;
use crate::contract::slot::{Depth, SupportedDepth};
use crate::driver::abi::DevSpan;
use crate::driver::{DevPtr, Driver, DriverError, EventId, StreamId};

/// Device resources created so far: released by its drop — on every way
/// out of [`Device::open`]'s build that is not success — unless
/// [`kept`](Building::keep).
struct Building<'d, D: Driver> {
    driver: &'d D,
    memory: Vec<DevPtr>,
    events: Vec<EventId>,
    streams: Vec<StreamId>,
}

impl<'d, D: Driver> Building<'d, D> {
    fn new(driver: &'d D) -> Self {
        Building {
            driver,
            memory: Vec::new(),
            events: Vec::new(),
            streams: Vec::new(),
        }
    }

    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, DriverError> {
        let p = self.driver.alloc(bytes)?;
        self.memory.push(p);
        Ok(p)
    }

    fn event(&mut self) -> Result<EventId, DriverError> {
        let e = self.driver.create_event()?;
        self.events.push(e);
        Ok(e)
    }

    fn stream(&mut self) -> Result<StreamId, DriverError> {
        let s = self.driver.create_stream()?;
        self.streams.push(s);
        Ok(s)
    }

    /// Everything built is the device's now: nothing is released.
    fn keep(mut self) {
        self.memory.clear();
        self.events.clear();
        self.streams.clear();
    }
}

impl<D: Driver> Drop for Building<'_, D> {
    fn drop(&mut self) {
        // Nothing was submitted yet: every resource is idle and may go.
        for s in self.streams.drain(..) {
            let _ = self.driver.destroy_stream(s);
        }
        for e in self.events.drain(..) {
            let _ = self.driver.destroy_event(e);
        }
        for p in self.memory.drain(..) {
            let _ = self.driver.free(p);
        }
    }
}

/// What [`Device::open`] builds before the device exists.
pub(super) struct Parts<const DEPTH: usize> {
    aicpu: StreamId,
    aicore: StreamId,
    /// The code generation the AICore stream was created under.
    aicore_epoch: u64,
    regions: [SlotRegions; DEPTH],
    blocks: [Mutex<SlotHost>; DEPTH],
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// Creates the device's resources; on failure, what it made is
    /// released as the builder drops.
    pub(super) fn build(
        driver: &D,
        config: Resolved,
        abi: &Abi,
    ) -> Result<Parts<DEPTH>, ErrorKind> {
        let mut b = Building::new(driver);
        let aicpu = b.stream().map_err(ErrorKind::from_driver)?;
        let aicore_epoch = driver.code_epoch();
        let aicore = b.stream().map_err(ErrorKind::from_driver)?;
        let mut regions = Vec::with_capacity(DEPTH);
        for _ in 0..DEPTH {
            regions.push(Self::slot_regions(&mut b, config, abi).map_err(ErrorKind::from_driver)?);
        }
        let Ok(regions) = <[SlotRegions; DEPTH]>::try_from(regions) else {
            return Err(ErrorKind::broken("DEPTH regions built, not DEPTH"));
        };
        // Host buffers: a failed host allocation is an error, never an abort.
        let mut blocks = Vec::with_capacity(DEPTH);
        for _ in 0..DEPTH {
            blocks.push(Mutex::new(SlotHost::new(abi)?));
        }
        let Ok(blocks) = <[Mutex<SlotHost>; DEPTH]>::try_from(blocks) else {
            return Err(ErrorKind::broken("DEPTH host buffers built, not DEPTH"));
        };
        b.keep();
        Ok(Parts {
            aicpu,
            aicore,
            aicore_epoch,
            regions,
            blocks,
        })
    }

    /// One slot's regions: one allocation (the adapter's regions, then the
    /// arena — input, output, staging — at a staging-aligned offset) and
    /// its two events.
    fn slot_regions(
        b: &mut Building<'_, D>,
        config: Resolved,
        abi: &Abi,
    ) -> Result<SlotRegions, DriverError> {
        let arena_at = abi
            .layout
            .bytes
            .next_multiple_of(DeviceConfig::STAGING_ALIGN);
        let slot_bytes = arena_at.saturating_add(config.arena_bytes());
        let base = b.alloc(slot_bytes)?;
        // Zeroed once (one memset per slot): device memory comes from the
        // runtime as another process may have left it, and no byte of it
        // may reach a host buffer; and from here on a stamped region is
        // written only by the device, and its records prove whose they are.
        b.driver.memset(base, 0, slot_bytes)?;
        let arena = base.offset(arena_at);
        let mut spans = [DevSpan::new(DevPtr::from_raw(0), 0); MAX_REGIONS];
        for (i, (span, spec)) in spans.iter_mut().zip(&abi.regions).enumerate() {
            *span = DevSpan::new(base.offset(abi.layout.offset(i)), spec.bytes as u64);
        }
        Ok(SlotRegions {
            input: arena,
            region_base: base,
            output: arena.offset(config.arena_half_bytes()),
            staging: arena.offset(config.staging_offset()),
            abi: spans,
            ev_aicore: b.event()?,
            ev_fence: b.event()?,
        })
    }

    pub(super) fn assemble(driver: D, config: Resolved, abi: Abi, parts: Parts<DEPTH>) -> Self {
        let Parts {
            aicpu,
            aicore,
            aicore_epoch,
            regions,
            blocks,
        } = parts;
        let poisoned = Arc::default();
        Device {
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            config,
            regions,
            abi,
            blocks,
            buffers: SharedLedger::default(),
            state: Mutex::new(State::new(
                aicore,
                aicpu,
                aicore_epoch,
                Arc::clone(&poisoned),
            )),
            poisoned,
            driver,
            notices: std::sync::atomic::AtomicU8::new(look::NOTICE_UNKNOWN),
            finalized: AtomicU64::new(0),
            closed: false,
        }
    }
}
