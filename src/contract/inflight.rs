//! The ordered set of runs the stream pair holds: what replaced the single
//! "owner" of the reference runtime. "Ready" no longer means "idle": the pair
//! is ready for a launch while up to `DEPTH` runs are in this set.
//!
//! Fixed capacity, no allocation: a launch inserts at the end (sequence
//! numbers are monotonic, so the set stays in stream order); a fence, drop
//! or drain removes from anywhere.

use super::error::RunId;

/// How much is known about an in-flight run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Proof {
    /// Launched, completion events recorded, not yet observed complete.
    Pending,
    /// Completion could not be proven (a fence outlasted the watchdog, the
    /// device faulted, the events could not be recorded, the launch was
    /// partial): the slot is quarantined until a drain.
    Unproven,
}

/// One launched run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    /// Launch sequence number: stream order.
    pub seq: u64,
    pub run: RunId,
    pub slot: usize,
    pub proof: Proof,
}

#[derive(Debug)]
pub(crate) struct InFlightSet<const N: usize> {
    entries: [Option<Entry>; N],
    len: usize,
}

impl<const N: usize> InFlightSet<N> {
    pub fn new() -> Self {
        InFlightSet {
            entries: [None; N],
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// Appends `e`; refused when full or when `e.seq` is not above every
    /// sequence number in the set (stream order is launch order).
    pub fn push(&mut self, e: Entry) -> Result<(), Entry> {
        if self.is_full() || self.iter().last().is_some_and(|l| l.seq >= e.seq) {
            return Err(e);
        }
        self.entries[self.len] = Some(e);
        self.len += 1;
        Ok(())
    }

    pub fn get_mut(&mut self, seq: u64) -> Option<&mut Entry> {
        self.entries[..self.len]
            .iter_mut()
            .flatten()
            .find(|e| e.seq == seq)
    }

    pub fn remove(&mut self, seq: u64) -> Option<Entry> {
        let at = self.iter().position(|e| e.seq == seq)?;
        let e = self.entries[at].take();
        self.entries[at..self.len].rotate_left(1);
        self.len -= 1;
        e
    }

    /// In stream order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries[..self.len].iter().flatten()
    }

    pub fn clear(&mut self) {
        self.entries = [None; N];
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(seq: u64, slot: usize) -> Entry {
        Entry {
            seq,
            run: RunId(seq + 100),
            slot,
            proof: Proof::Pending,
        }
    }

    #[test]
    fn keeps_stream_order_and_capacity() {
        let mut s = InFlightSet::<3>::new();
        s.push(e(1, 0)).unwrap();
        s.push(e(2, 1)).unwrap();
        assert_eq!(s.push(e(2, 2)), Err(e(2, 2)), "sequence must increase");
        s.push(e(5, 2)).unwrap();
        assert!(s.is_full());
        assert_eq!(s.push(e(6, 0)), Err(e(6, 0)));
        assert_eq!(s.remove(2), Some(e(2, 1)), "remove from the middle");
        assert_eq!(s.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 5]);
        assert_eq!(s.remove(2), None);
        s.push(e(7, 1)).unwrap();
        assert_eq!(s.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 5, 7]);
        s.get_mut(5).unwrap().proof = Proof::Unproven;
        assert_eq!(s.iter().nth(1).unwrap().proof, Proof::Unproven);
        s.clear();
        assert!(s.is_empty());
    }
}
