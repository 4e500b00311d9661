//! The stream pair's bookkeeping ([`StreamPair`]): its two streams and the
//! code epoch the AICore one can trust, the code generations of this
//! device's publications, and the streams taken out of service.

use crate::driver::StreamId;

/// Why the AICore stream may run stale instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::contract::device) enum Staleness {
    /// Fresh for every code it may be asked to run.
    Fresh,
    /// This device published new code since the stream was created.
    OwnPublication,
    /// Someone uploaded code to the NPU since the stream was created.
    ForeignUpload,
}

#[derive(Debug)]
pub(in crate::contract::device) struct StreamPair {
    aicore: StreamId,
    aicpu: StreamId,
    /// Code generation the AICore stream was created in.
    aicore_generation: u64,
    /// Current code generation: bumped by every publication that uploaded.
    generation: u64,
    /// The driver's code epoch when the AICore stream was created: an
    /// upload stamped above it may be stale in that stream's instruction
    /// cache.
    aicore_epoch: u64,
    /// Streams taken out of service but not destroyed yet: stale AICore
    /// streams replaced while runs were still queued on them, and idle
    /// streams whose destroy failed. Destroyed at a launch that finds
    /// nothing in flight, at every drain and at teardown, never reused.
    parked: Vec<StreamId>,
}

impl StreamPair {
    pub(super) fn new(aicore: StreamId, aicpu: StreamId, aicore_epoch: u64) -> Self {
        StreamPair {
            aicore,
            aicpu,
            aicore_generation: 0,
            generation: 0,
            aicore_epoch,
            parked: Vec::new(),
        }
    }

    pub(in crate::contract::device) fn aicore(&self) -> StreamId {
        self.aicore
    }

    pub(in crate::contract::device) fn aicpu(&self) -> StreamId {
        self.aicpu
    }

    /// New code was uploaded by this device: the AICore stream is stale.
    pub(in crate::contract::device) fn new_generation(&mut self) {
        self.generation += 1;
    }

    /// Whether the AICore stream may be stale, given the driver's code
    /// epoch now. Own publications are checked first.
    pub(in crate::contract::device) fn staleness(&self, code_epoch: u64) -> Staleness {
        if self.aicore_generation != self.generation {
            Staleness::OwnPublication
        } else if code_epoch > self.aicore_epoch {
            Staleness::ForeignUpload
        } else {
            Staleness::Fresh
        }
    }

    /// A fresh AICore stream, created when the driver's code epoch was
    /// `epoch`, replaces the old one, which is returned (to destroy or park).
    pub(in crate::contract::device) fn replace_aicore(
        &mut self,
        fresh: StreamId,
        epoch: u64,
    ) -> StreamId {
        self.aicore_generation = self.generation;
        self.aicore_epoch = epoch;
        std::mem::replace(&mut self.aicore, fresh)
    }

    /// A fresh AICPU stream replaces the old one, which is returned.
    pub(in crate::contract::device) fn replace_aicpu(&mut self, fresh: StreamId) -> StreamId {
        std::mem::replace(&mut self.aicpu, fresh)
    }

    /// Takes a stream out of service without destroying it: destroyed
    /// later, never reused.
    pub(in crate::contract::device) fn park(&mut self, stream: StreamId) {
        self.parked.push(stream);
    }

    pub(in crate::contract::device) fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    pub(in crate::contract::device) fn take_parked(&mut self) -> Vec<StreamId> {
        std::mem::take(&mut self.parked)
    }

    /// At teardown: every stream this device still has, parked ones first.
    pub(in crate::contract::device) fn take_all(&mut self) -> Vec<StreamId> {
        let mut all = self.take_parked();
        all.extend([self.aicore, self.aicpu]);
        all
    }
}
