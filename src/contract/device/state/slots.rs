//! The slots and their leases: who may use slot `i` now. A lease is the
//! generation of a slot's token; every transition names the lease it holds,
//! so a stale handle can never act on a slot's next user.

use crate::contract::error::ErrorKind;
use crate::contract::slot::SlotSet;

/// One slot's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::contract::device) enum SlotState {
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

/// What dropping a token (or a run holding it) finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::contract::device) enum Release {
    /// The token was merely held: the slot is free again.
    Freed,
    /// A launched run with this lease holds the slot: wait for it first.
    InFlight,
    /// The lease is not the slot's (a stale handle): nothing to release.
    Stale,
}

/// Every slot's state and current lease. Leases only grow, so a lease
/// names one tenancy of one slot for the device's life.
#[derive(Debug)]
pub(in crate::contract::device) struct Slots<const DEPTH: usize> {
    states: [SlotState; DEPTH],
    leases: [u64; DEPTH],
    /// The launched run's handle is gone (an awaited fence dropped before
    /// it resolved): nobody will fence it, so the slot may be reclaimed as
    /// soon as the run is proven complete. (A run lost to `mem::forget` is
    /// not marked: its handle may be alive, so only a drain reclaims it.)
    abandoned: [bool; DEPTH],
}

impl<const DEPTH: usize> Slots<DEPTH> {
    pub(super) fn new() -> Self {
        Slots {
            states: [SlotState::Free; DEPTH],
            leases: [0; DEPTH],
            abandoned: [false; DEPTH],
        }
    }

    pub(in crate::contract::device) fn state(&self, slot: usize) -> SlotState {
        self.states[slot]
    }

    /// Hands out a new lease on a free slot; otherwise says what holds it.
    pub(in crate::contract::device) fn take(&mut self, slot: usize) -> Result<u64, SlotState> {
        match self.states[slot] {
            SlotState::Free => {
                self.leases[slot] += 1;
                let lease = self.leases[slot];
                self.states[slot] = SlotState::Held { lease };
                self.abandoned[slot] = false;
                Ok(lease)
            }
            busy => Err(busy),
        }
    }

    /// `Ok` when `lease` holds `slot` (a token, not a launched run).
    pub(in crate::contract::device) fn check_held(
        &self,
        slot: usize,
        lease: u64,
    ) -> Result<(), ErrorKind> {
        match self.states[slot] {
            SlotState::Held { lease: l } if l == lease => Ok(()),
            _ => Err(self.stale(slot, lease)),
        }
    }

    /// `Ok` when a launched run with `lease` holds `slot`.
    pub(in crate::contract::device) fn check_in_flight(
        &self,
        slot: usize,
        lease: u64,
    ) -> Result<(), ErrorKind> {
        if self.states[slot] == (SlotState::InFlight { lease }) {
            Ok(())
        } else {
            Err(self.stale(slot, lease))
        }
    }

    pub(in crate::contract::device) fn stale(&self, slot: usize, lease: u64) -> ErrorKind {
        ErrorKind::StaleToken {
            token: lease,
            current: self.leases[slot],
        }
    }

    /// The held slot's run was launched.
    pub(in crate::contract::device) fn launched(&mut self, slot: usize, lease: u64) {
        debug_assert_eq!(self.states[slot], SlotState::Held { lease });
        self.states[slot] = SlotState::InFlight { lease };
    }

    /// The slot's launched run was observed complete: the slot goes back
    /// to the run's handle (unless a drain or a quarantine moved it on).
    pub(in crate::contract::device) fn completed(&mut self, slot: usize, lease: u64) {
        if self.states[slot] == (SlotState::InFlight { lease }) {
            self.states[slot] = SlotState::Held { lease };
        }
    }

    /// A handle with `lease` is dropped.
    pub(in crate::contract::device) fn release(&mut self, slot: usize, lease: u64) -> Release {
        match self.states[slot] {
            SlotState::Held { lease: l } if l == lease => {
                self.states[slot] = SlotState::Free;
                Release::Freed
            }
            SlotState::InFlight { lease: l } if l == lease => Release::InFlight,
            _ => Release::Stale,
        }
    }

    /// The handle of the launched run with `lease` is gone (see
    /// `abandoned`).
    pub(in crate::contract::device) fn abandon(&mut self, slot: usize, lease: u64) {
        if self.states[slot] == (SlotState::InFlight { lease }) {
            self.abandoned[slot] = true;
        }
    }

    /// The lease of the launched run that holds `slot` with no handle left.
    pub(in crate::contract::device) fn abandoned(&self, slot: usize) -> Option<u64> {
        match self.states[slot] {
            SlotState::InFlight { lease } if self.abandoned[slot] => Some(lease),
            _ => None,
        }
    }

    /// A dropped launched run was proven complete: its slot is free.
    pub(in crate::contract::device) fn free(&mut self, slot: usize, lease: u64) {
        if let SlotState::Held { lease: l } | SlotState::InFlight { lease: l } = self.states[slot]
            && l == lease
        {
            self.states[slot] = SlotState::Free;
        }
    }

    /// Takes the slot out of service until a drain; `true` when it was not
    /// quarantined already.
    pub(in crate::contract::device) fn quarantine(&mut self, slot: usize) -> bool {
        let fresh = self.states[slot] != SlotState::Quarantined;
        self.states[slot] = SlotState::Quarantined;
        fresh
    }

    /// After a drain proved the queue quiet: every slot is free (handles
    /// still alive hold old leases and release nothing). Returns how many
    /// were quarantined.
    pub(in crate::contract::device) fn reset_all(&mut self) -> usize {
        let released = self
            .states
            .iter()
            .filter(|s| **s == SlotState::Quarantined)
            .count();
        self.states = [SlotState::Free; DEPTH];
        self.abandoned = [false; DEPTH];
        released
    }

    /// (quarantined, launched) slots.
    pub(in crate::contract::device) fn sets(&self) -> (SlotSet, SlotSet) {
        let mut quarantined = SlotSet::new();
        let mut launched = SlotSet::new();
        for (i, s) in self.states.iter().enumerate() {
            match s {
                SlotState::Quarantined => quarantined.insert(i),
                SlotState::InFlight { .. } => launched.insert(i),
                _ => {}
            }
        }
        (quarantined, launched)
    }
}
