//! The stream pair's queue as the host knows it: the ordered set of
//! launched runs, their launch sequence numbers, the poison and the chain.
//!
//! Two rules live here and nowhere else: **a poison breaks the chain and
//! leaves the named run unproven** — once the device misbehaved, what it
//! holds is not known (no run may chain on it), and the run the poison
//! names cannot be proven complete by its own fence any more — and **an
//! unproven run poisons** (if nothing did yet): nothing queued behind it
//! can be dated, so the queue-aware time rule could no longer tell a hung
//! device, and the waits behind it rely on the runner being poisoned.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::contract::error::{ErrorKind, Poison, PoisonCause, RunId};
use crate::contract::inflight::{Entry, InFlightSet, Proof};

/// The last launched run's output: what [`Input::Previous`](crate::Input::Previous) reads.
#[derive(Debug, Clone, Copy)]
pub(in crate::contract::device) struct Chain {
    pub(in crate::contract::device) slot: usize,
    pub(in crate::contract::device) len: usize,
}

#[derive(Debug)]
pub(in crate::contract::device) struct Queue<const DEPTH: usize> {
    runs: InFlightSet<DEPTH>,
    next_seq: u64,
    poison: Option<Poison>,
    /// `poison.is_some()`, readable without the device's lock
    /// (`Device::is_poisoned`): written here, under
    /// it, wherever `poison` changes.
    poisoned: Arc<AtomicBool>,
    chain: Option<Chain>,
}

impl<const DEPTH: usize> Queue<DEPTH> {
    pub(super) fn new(poisoned: Arc<AtomicBool>) -> Self {
        Queue {
            runs: InFlightSet::new(),
            next_seq: 1,
            poison: None,
            poisoned,
            chain: None,
        }
    }

    /// The launched runs, in stream order (read only: changes go through
    /// the methods below).
    pub(in crate::contract::device) fn runs(&self) -> &InFlightSet<DEPTH> {
        &self.runs
    }

    pub(in crate::contract::device) fn poison(&self) -> Option<Poison> {
        self.poison
    }

    pub(in crate::contract::device) fn chain(&self) -> Option<Chain> {
        self.chain
    }

    /// Run `run` in `slot` reached the streams: it joins the set in stream
    /// order (`Pending` when its fence was recorded, `Unproven` when no
    /// fence can observe it). Refused only if an invariant broke (the set
    /// full, the sequence not fresh); the caller must then treat the slot
    /// as unproven — the device may still write it.
    pub(in crate::contract::device) fn admit(
        &mut self,
        run: RunId,
        slot: usize,
        proof: Proof,
    ) -> Result<u64, ErrorKind> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let entry = Entry {
            seq,
            run,
            slot,
            proof,
            launched_at: None,
            ahead_done_at: Duration::ZERO,
            ahead_undated: false,
            observed: false,
        };
        match self.runs.push(entry) {
            Ok(()) => Ok(seq),
            Err(_) => Err(ErrorKind::broken(
                "a launched run did not fit the in-flight set",
            )),
        }
    }

    /// The sequence number the next admitted run gets.
    pub(in crate::contract::device) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The run in `slot` launched with `len` elements is what
    /// [`Input::Previous`](crate::Input::Previous) reads next.
    pub(in crate::contract::device) fn chain_on(&mut self, slot: usize, len: usize) {
        self.chain = Some(Chain { slot, len });
    }

    /// Poisons the runner (the first cause wins), breaks the chain and
    /// leaves the named run unproven — the rule of this module.
    pub(in crate::contract::device) fn poison_with(
        &mut self,
        cause: PoisonCause,
        run: RunId,
        slot: usize,
    ) {
        if self.poison.is_none() {
            self.poison = Some(Poison {
                cause,
                run: Some(run),
                slot: Some(slot),
            });
            self.poisoned.store(true, Ordering::Release);
        }
        self.chain = None;
        for e in self.runs.iter_mut() {
            if e.run == run {
                e.proof = Proof::Unproven;
            }
        }
    }

    /// A poison no run can be named for (a panic outside a launch).
    pub(in crate::contract::device) fn poison_unattributed(&mut self, cause: PoisonCause) {
        if self.poison.is_none() {
            self.poison = Some(Poison {
                cause,
                run: None,
                slot: None,
            });
            self.poisoned.store(true, Ordering::Release);
        }
        self.chain = None;
    }

    /// Run `seq` can no longer be proven complete by its own fence (a
    /// fault reached it, a wait for it gave up). Poisons the runner with
    /// `cause`, naming it, unless a poison is set already (the first cause
    /// wins: callers that know a better one poison first).
    pub(in crate::contract::device) fn unprove(&mut self, seq: u64, cause: PoisonCause) {
        let Some(e) = self.runs.get_mut(seq) else {
            return;
        };
        e.proof = Proof::Unproven;
        let (run, slot) = (e.run, e.slot);
        self.poison_with(cause, run, slot);
    }

    /// Run `seq` was observed complete at `at` (`None`: not dated): it
    /// leaves the set, and the runs behind it learn it.
    pub(in crate::contract::device) fn complete(&mut self, seq: u64, at: Option<Duration>) {
        self.runs.observed(seq, at);
        self.runs.remove(seq);
    }

    /// Run `seq` was seen complete while waiting for a later run; its own
    /// handle has not fenced it yet.
    pub(in crate::contract::device) fn seen_complete(&mut self, seq: u64, at: Duration) {
        if self.runs.iter().any(|e| e.seq == seq) {
            self.runs.observed(seq, Some(at));
        }
    }

    /// Run `seq`'s fence was seen complete at `at` by a wait that did not
    /// fence it (a host access): it and every pending run ahead of it are
    /// observed complete; nothing leaves the set.
    pub(in crate::contract::device) fn seen_through(&mut self, seq: u64, at: Duration) {
        self.runs.observed_through(seq, at);
    }

    /// Dates every undated fact with `now` (see [`InFlightSet::date`]).
    pub(in crate::contract::device) fn date(&mut self, now: Duration) {
        self.runs.date(now);
    }

    /// The chain no longer holds (a stream was replaced after a fault, or
    /// a run in the set is unproven): nothing may chain on old outputs.
    pub(in crate::contract::device) fn break_chain(&mut self) {
        self.chain = None;
    }

    /// A drain proved the queue quiet: every run leaves the set and the
    /// poison is cleared. Returns (runs retired, the poison cleared).
    pub(in crate::contract::device) fn quiet(&mut self) -> (usize, Option<Poison>) {
        let retired = self.runs.len();
        self.runs.clear();
        self.poisoned.store(false, Ordering::Release);
        (retired, self.poison.take())
    }
}
