//! The run-time bookkeeping behind the lock: which slot is free, held, in
//! flight or quarantined, the in-flight set, the poison, the chain, the
//! streams and their code epoch, the pins, the counters.

use super::ContractStats;
use crate::contract::error::{ErrorKind, Poison, PoisonCause, RunId};
use crate::contract::inflight::InFlightSet;
use crate::driver::{CodeHandle, StreamId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotState {
    /// The runner holds the slot; a token can be taken.
    Free,
    /// A token with this lease is out (alone or inside a prepared or
    /// fenced run).
    Held { lease: u64 },
    /// A launched run with this lease holds the slot.
    InFlight { lease: u64 },
    /// The slot's run could not be proven complete; only a drain frees it.
    Quarantined,
}

/// The last launched run's output: what [`Input::Previous`](crate::Input::Previous) reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Chain {
    pub(super) slot: usize,
    pub(super) len: usize,
}

pub(super) struct State<const DEPTH: usize> {
    pub(super) slots: [SlotState; DEPTH],
    pub(super) leases: [u64; DEPTH],
    pub(super) in_flight: InFlightSet<DEPTH>,
    pub(super) poison: Option<Poison>,
    pub(super) next_run: RunId,
    pub(super) next_seq: u64,
    pub(super) chain: Option<Chain>,
    pub(super) aicore: StreamId,
    pub(super) aicpu: StreamId,
    /// Code generation the AICore stream was created in.
    pub(super) aicore_generation: u64,
    /// Current code generation: bumped by every publication.
    pub(super) generation: u64,
    /// The driver's code epoch when the AICore stream was created: an upload
    /// stamped above it may be stale in that stream's instruction cache.
    pub(super) aicore_epoch: u64,
    /// The uploads this device's current publication pinned (one per
    /// registration), released at the next publication and at close.
    pub(super) pinned: Vec<CodeHandle>,
    /// The run being launched while the lock is held across its submission
    /// (what a panic interrupted, if one does).
    pub(super) launching: Option<(RunId, usize)>,
    /// Streams taken out of service but not destroyed yet: stale AICore
    /// streams replaced while runs were still queued on them, and idle
    /// streams whose destroy failed. Destroyed at a launch that finds
    /// nothing in flight, at every drain and at teardown, never reused.
    pub(super) abandoned: Vec<StreamId>,
    pub(super) stats: ContractStats,
}

impl<const DEPTH: usize> State<DEPTH> {
    pub(super) fn poison(&mut self, cause: PoisonCause, run: RunId, slot: usize) {
        if self.poison.is_none() {
            self.poison = Some(Poison {
                cause,
                run: Some(run),
                slot: Some(slot),
            });
        }
    }

    /// A poison no run can be named for (a panic outside a launch).
    pub(super) fn poison_unattributed(&mut self, cause: PoisonCause) {
        if self.poison.is_none() {
            self.poison = Some(Poison {
                cause,
                run: None,
                slot: None,
            });
        }
    }

    pub(super) fn quarantine(&mut self, slot: usize) {
        if self.slots[slot] != SlotState::Quarantined {
            self.slots[slot] = SlotState::Quarantined;
            self.stats.quarantined += 1;
        }
    }

    pub(super) fn check_held(&self, slot: usize, lease: u64) -> Result<(), ErrorKind> {
        match self.slots[slot] {
            SlotState::Held { lease: l } if l == lease => Ok(()),
            _ => Err(self.stale(slot, lease)),
        }
    }

    pub(super) fn stale(&self, slot: usize, lease: u64) -> ErrorKind {
        ErrorKind::StaleToken {
            token: lease,
            current: self.leases[slot],
        }
    }
}
