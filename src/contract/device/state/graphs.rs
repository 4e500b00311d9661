//! The device's captured runs (`Graphs`): each slot's capture region (where
//! the host writes a replayed run's block before each replay) and fork
//! event (what the AICore stream joins a capture by), the live captures by
//! id — each with the graph it ended into and the shape it was captured
//! with — the graphs whose destruction waits for their replay to finish,
//! and whether the last run queued was a replay (a launch after one orders
//! its AICore stream behind it).

use std::collections::BTreeMap;

use crate::driver::abi::TensorView;
use crate::driver::{CodeHandle, DevPtr, EventId, GraphId};

/// What a run was captured with: a replay must match it.
#[derive(Debug, Clone)]
pub(in crate::contract::device) struct Shape {
    pub code: CodeHandle,
    pub tensors: Vec<TensorView>,
    pub scalars: usize,
    /// The AICPU kernel reads the AICore block.
    pub shared: bool,
}

/// One live capture of a slot.
#[derive(Debug)]
pub(in crate::contract::device) struct Captured {
    pub slot: usize,
    pub graph: GraphId,
    pub shape: Shape,
    /// The code epoch at capture: an upload on the NPU since makes it stale.
    pub epoch: u64,
    /// The stream generation at capture: a recovery since makes it stale.
    pub streams: u64,
}

/// A graph to destroy once no replay of it runs: none can while its slot
/// has no run in flight.
#[derive(Debug, Clone, Copy)]
pub(in crate::contract::device) struct Doomed {
    pub graph: GraphId,
    pub slot: usize,
}

/// A slot's capture region and fork event (recorded on the AICPU stream at
/// a capture's start; the AICore stream joins the capture by waiting for
/// it), made at the slot's first capture.
#[derive(Debug, Clone, Copy)]
pub(in crate::contract::device) struct SlotCapture {
    pub region: DevPtr,
    /// `None` until made (a failed creation keeps the region: nothing of
    /// what was made is dropped unreleased).
    pub fork: Option<EventId>,
}

#[derive(Debug, Default)]
pub(in crate::contract::device) struct Graphs {
    /// Each slot's capture region and fork event (made at its first
    /// capture).
    regions: Vec<Option<SlotCapture>>,
    live: BTreeMap<u64, Captured>,
    doomed: Vec<Doomed>,
    next_id: u64,
    /// The fence event of the last run queued, when it was a replay.
    after_replay: Option<EventId>,
    /// Bumped whenever the stream pair is replaced by a recovery.
    pub streams: u64,
    /// A capture whose end the driver refused: its origin stream (and the
    /// AICore stream, joined) still capture until an end succeeds.
    pub open: Option<crate::driver::StreamId>,
    /// A wait behind a replay is on the AICore stream with no run behind
    /// it (its launch then failed): work no run tracks, which a drain must
    /// sync and a stream's retirement wait for.
    pub unsynced: bool,
}

impl Graphs {
    pub fn new(depth: usize) -> Self {
        Graphs {
            regions: vec![None; depth],
            next_id: 1,
            ..Graphs::default()
        }
    }

    pub fn region(&self, slot: usize) -> Option<SlotCapture> {
        self.regions.get(slot).copied().flatten()
    }

    pub fn set_region(&mut self, slot: usize, at: SlotCapture) {
        if let Some(r) = self.regions.get_mut(slot) {
            *r = Some(at);
        }
    }

    /// A new capture's id.
    pub fn insert(&mut self, c: Captured) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.live.insert(id, c);
        id
    }

    pub fn get(&self, id: u64) -> Option<&Captured> {
        self.live.get(&id)
    }

    /// The capture `id` is let go of: its graph is doomed.
    pub fn remove(&mut self, id: u64) -> Option<Doomed> {
        self.live.remove(&id).map(|c| Doomed {
            graph: c.graph,
            slot: c.slot,
        })
    }

    /// Every live capture is let go of (a recovery, a publication of a
    /// shared device, the teardown): their graphs are doomed, their ids
    /// answer "stale" from now on.
    pub fn doom_all(&mut self) {
        let live = std::mem::take(&mut self.live);
        self.doomed.extend(live.into_values().map(|c| Doomed {
            graph: c.graph,
            slot: c.slot,
        }));
        self.after_replay = None;
    }

    pub fn doom(&mut self, d: Doomed) {
        self.doomed.push(d);
    }

    /// The doomed graphs, taken to be destroyed (what fails goes back
    /// through [`doom`](Self::doom)).
    pub fn take_doomed(&mut self) -> Vec<Doomed> {
        std::mem::take(&mut self.doomed)
    }

    pub fn has_doomed(&self) -> bool {
        !self.doomed.is_empty()
    }

    /// The slots of the graphs still doomed (destroys refused).
    pub fn doomed_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.doomed.iter().map(|d| d.slot)
    }

    /// Every region and fork event, taken (the teardown releases them).
    pub fn take_regions(&mut self) -> Vec<SlotCapture> {
        self.regions.iter_mut().filter_map(Option::take).collect()
    }

    /// The last run queued was a replay fenced by `fence` (`Some`), or a
    /// launch (`None`).
    pub fn queued(&mut self, fence: Option<EventId>) {
        self.after_replay = fence;
    }

    pub fn after_replay(&self) -> Option<EventId> {
        self.after_replay
    }
}
