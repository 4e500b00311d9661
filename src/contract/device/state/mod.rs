//! The run-time bookkeeping behind the device's lock, split by what it
//! owns; each part keeps its own invariants behind private fields:
//!
//! | file | owns |
//! |---|---|
//! | `slots.rs` | each slot's state and lease |
//! | `queue.rs` | the in-flight runs in stream order, the poison, the chain — and the rule "poison ⇒ chain broken ⇒ run unproven" |
//! | `stream_pair.rs` | the stream pair's bookkeeping: its two streams, code generations and the code epoch (staleness), parked streams |
//! | `pins.rs` | the uploads the current publication pinned |
//! | `graphs.rs` | captured runs: each slot's capture region, the live captures and their shapes, graphs awaiting destruction |
//!
//! This file holds the rules that span two parts (a lost launch: the run
//! unproven *and* its slot quarantined) and the counters.

mod graphs;
mod pins;
mod queue;
mod slots;
mod stream_pair;

pub(super) use self::graphs::{Captured, Doomed, Graphs, Shape, SlotCapture};
pub(super) use self::pins::Pins;
pub(super) use self::queue::Queue;
pub(super) use self::slots::{Release, SlotState, Slots};
pub(super) use self::stream_pair::{Staleness, StreamPair};

use super::ContractStats;
use crate::contract::error::{ErrorKind, PoisonCause, RunId};
use crate::contract::inflight::Proof;
use crate::driver::StreamId;

pub(super) struct State<const DEPTH: usize> {
    pub(super) slots: Slots<DEPTH>,
    pub(super) queue: Queue<DEPTH>,
    pub(super) streams: StreamPair,
    pub(super) pins: Pins,
    pub(super) graphs: Graphs,
    pub(super) stats: ContractStats,
    next_run: RunId,
    /// Publications begun (a code reference names the one it belongs to).
    pub(super) publications: u64,
    /// The run being launched while the lock is held across its submission
    /// (what a panic interrupted, if one does).
    launching: Option<(RunId, usize)>,
}

impl<const DEPTH: usize> State<DEPTH> {
    pub(super) fn new(
        aicore: StreamId,
        aicpu: StreamId,
        aicore_epoch: u64,
        poisoned: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        State {
            slots: Slots::new(),
            queue: Queue::new(poisoned),
            streams: StreamPair::new(aicore, aicpu, aicore_epoch),
            pins: Pins::default(),
            graphs: Graphs::new(DEPTH),
            stats: ContractStats::default(),
            next_run: RunId::FIRST,
            publications: 0,
            launching: None,
        }
    }

    /// A fresh run id (ids never repeat on a device).
    pub(super) fn new_run(&mut self) -> RunId {
        let run = self.next_run;
        self.next_run = run.next();
        run
    }

    /// `run` in `slot` is being submitted while the lock is held.
    pub(super) fn launching(&mut self, what: Option<(RunId, usize)>) {
        self.launching = what;
    }

    /// A panic interrupted a transition that held the lock: what reached
    /// the device is unknown. The run being launched, if any, is named.
    pub(super) fn interrupted(&mut self) {
        match self.launching {
            Some((run, slot)) => self.queue.poison_with(PoisonCause::Interrupted, run, slot),
            None => self.queue.poison_unattributed(PoisonCause::Interrupted),
        }
    }

    /// Takes `slot` out of service until a drain.
    pub(super) fn quarantine(&mut self, slot: usize) {
        if self.slots.quarantine(slot) {
            self.stats.quarantined += 1;
        }
    }

    /// A launch reached the device but no fence can observe it (the AICPU
    /// launch or a fence record failed): the run joins the queue unproven,
    /// its slot is quarantined and the runner poisoned (by `culprit`, the
    /// run the failure belongs to: this one, or an earlier run whose fault
    /// it met).
    pub(super) fn lost(
        &mut self,
        run: RunId,
        slot: usize,
        cause: PoisonCause,
        culprit: (RunId, usize),
    ) {
        // A refused admission (a broken invariant) changes nothing here:
        // the slot is quarantined and the runner poisoned either way, so
        // nothing reuses what the device may still write.
        let _admitted = self.queue.admit(run, slot, Proof::Unproven);
        self.quarantine(slot);
        self.queue.poison_with(cause, culprit.0, culprit.1);
        self.stats.launched += 1;
    }

    /// Why `slot` cannot be taken, for the error.
    pub(super) fn busy(&self, slot: usize, state: SlotState) -> ErrorKind {
        let run = self
            .queue
            .runs()
            .iter()
            .find(|e| e.slot == slot)
            .map(|e| e.run);
        match state {
            SlotState::Quarantined => ErrorKind::SlotQuarantined { run },
            SlotState::InFlight { .. } => ErrorKind::SlotInFlight { run },
            SlotState::Free | SlotState::Held { .. } => ErrorKind::SlotTaken,
        }
    }
}
