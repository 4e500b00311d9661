//! What a shared device's lanes hold: a claim on a slot that holds the
//! device itself ([`ArcClaim`], the third form of the one `Claim` a run is
//! generic over), and the [`Cell`] the claims share.

use std::sync::Arc;

use crate::contract::device::Device;
use crate::contract::error::{Action, Error, ErrorKind, Poison};
use crate::contract::lane::Source;
use crate::contract::port::Port;
use crate::contract::slot::{Claim, Depth, SupportedDepth};
use crate::driver::Driver;

/// The device a shared device's claims hold (apart from the lanes that
/// hold the claims: no cycle keeps it alive).
pub(crate) struct Cell<D: Driver, const DEPTH: usize> {
    pub(crate) device: Device<D, DEPTH>,
}

/// A claim on slot `slot` of a shared device, with lease `lease`: released
/// when dropped, as a token is. It holds the device, so a run holding it
/// borrows nothing.
pub(crate) struct ArcClaim<D: Driver, const DEPTH: usize> {
    cell: Arc<Cell<D, DEPTH>>,
    slot: usize,
    lease: u64,
}

impl<D: Driver, const DEPTH: usize> Claim for ArcClaim<D, DEPTH> {
    #[inline]
    fn slot(&self) -> usize {
        self.slot
    }

    #[inline]
    fn lease(&self) -> u64 {
        self.lease
    }

    #[inline]
    fn port(&self) -> &dyn Port {
        self.cell.device.port()
    }
}

impl<D: Driver, const DEPTH: usize> Drop for ArcClaim<D, DEPTH> {
    fn drop(&mut self) {
        self.cell.device.port().release(self.slot, self.lease);
    }
}

impl<D: Driver, const DEPTH: usize> Source<ArcClaim<D, DEPTH>> for Arc<Cell<D, DEPTH>>
where
    Depth<DEPTH>: SupportedDepth,
{
    fn claim(&self, slot: usize) -> Result<ArcClaim<D, DEPTH>, Error> {
        let fail = |k| Error::new((), Action::TakeSlot, None, Some(slot), k);
        if slot >= DEPTH {
            return Err(fail(ErrorKind::SlotOutOfRange { slot, depth: DEPTH }));
        }
        let lease = self.device.take(slot).map_err(fail)?;
        Ok(ArcClaim {
            cell: Arc::clone(self),
            slot,
            lease,
        })
    }

    fn poisoned(&self) -> Option<Poison> {
        self.device.health().poisoned
    }

    fn port(&self) -> &dyn Port {
        self.device.port()
    }
}
