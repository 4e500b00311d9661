//! The ordered set of runs the stream pair holds: what replaced the single
//! "owner" of the reference runtime. "Ready" no longer means "idle": the pair
//! is ready for a launch while up to `DEPTH` runs are in this set.
//!
//! Fixed capacity, no allocation: a launch inserts at the end (sequence
//! numbers are monotonic, so the set stays in stream order); a fence, drop
//! or drain removes from anywhere.

use std::time::Duration;

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
    /// A driver-clock time at or after the launch was submitted: the run
    /// cannot have reached the head of the queue before it. `None` until
    /// first needed — the fast paths read no clock — and then dated with
    /// the time it is first needed, which is later still: a safe bound.
    pub launched_at: Option<Duration>,
    /// The latest driver-clock time at which a run *ahead* of this one was
    /// observed complete (zero when none was).
    pub ahead_done_at: Duration,
    /// A run ahead was observed complete without a time (a fast-path
    /// fence): `ahead_done_at` is dated when first needed.
    pub ahead_undated: bool,
    /// Observed complete (by a wait for another run) while its own handle
    /// has not fenced it yet.
    pub observed: bool,
}

impl Entry {
    /// When this run reached the head of the queue, at the latest — an
    /// upper bound, so "now − `head_since`" never overstates how long the
    /// device has had it alone. Meaningful once every run ahead of it is
    /// observed complete; `None` until [`InFlightSet::date`] ran.
    pub fn head_since(&self) -> Option<Duration> {
        let launched = self.launched_at?;
        (!self.ahead_undated).then(|| launched.max(self.ahead_done_at))
    }
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

    /// Run `seq` was observed complete at driver-clock time `at` (`None`:
    /// not dated): every run behind it learns that one more run ahead of it
    /// is done.
    pub fn observed(&mut self, seq: u64, at: Option<Duration>) {
        for e in self.entries[..self.len].iter_mut().flatten() {
            if e.seq == seq {
                e.observed = true;
            } else if e.seq > seq {
                match at {
                    Some(at) => e.ahead_done_at = e.ahead_done_at.max(at),
                    None => e.ahead_undated = true,
                }
            }
        }
    }

    /// Run `seq`'s own fence was seen complete at `at`: so was every
    /// pending run ahead of it (the streams are FIFO: a run's fence
    /// completes only after everything queued before it). A run ahead that
    /// could not be proven complete stays unproven.
    pub fn observed_through(&mut self, seq: u64, at: Duration) {
        let mut ahead = [0u64; N];
        let mut n = 0;
        for e in self.entries[..self.len].iter().flatten() {
            if e.seq <= seq && e.proof == Proof::Pending && !e.observed {
                ahead[n] = e.seq;
                n += 1;
            }
        }
        for &s in &ahead[..n] {
            self.observed(s, Some(at));
        }
    }

    /// Dates every undated fact with `now`, a driver-clock time read after
    /// each of them happened (so each date is a safe upper bound).
    pub fn date(&mut self, now: Duration) {
        for e in self.entries[..self.len].iter_mut().flatten() {
            e.launched_at.get_or_insert(now);
            if e.ahead_undated {
                e.ahead_done_at = e.ahead_done_at.max(now);
                e.ahead_undated = false;
            }
        }
    }

    /// The head of the queue as far as the host knows: the first run (in
    /// stream order) not observed complete.
    pub fn head(&self) -> Option<&Entry> {
        self.iter().find(|e| !e.observed)
    }

    /// Runs ahead of `seq` not observed complete.
    pub fn ahead_of(&self, seq: u64) -> usize {
        self.iter().filter(|e| e.seq < seq && !e.observed).count()
    }

    pub fn remove(&mut self, seq: u64) -> Option<Entry> {
        let at = self.iter().position(|e| e.seq == seq)?;
        let e = self.entries[at].take();
        self.entries[at..self.len].rotate_left(1);
        self.len -= 1;
        e
    }

    /// In stream order, to change what is known about each run (never
    /// its place: sequence numbers are fixed).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.entries[..self.len].iter_mut().flatten()
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
            run: RunId::new(seq + 100).unwrap(),
            slot,
            proof: Proof::Pending,
            launched_at: Some(Duration::from_millis(seq)),
            ahead_done_at: Duration::ZERO,
            ahead_undated: false,
            observed: false,
        }
    }

    #[test]
    fn observations_move_the_head_and_date_it() {
        let ms = Duration::from_millis;
        let mut s = InFlightSet::<4>::new();
        for (seq, slot) in [(1, 1), (2, 2), (3, 3)] {
            s.push(e(seq, slot)).unwrap();
        }
        assert_eq!(s.head().map(|h| h.seq), Some(1));
        assert_eq!(s.ahead_of(3), 2);
        // Run 2 completes first (as far as the host saw): run 1 is still
        // the head; run 3 learns the time, but not that it is the head.
        s.observed(2, Some(ms(50)));
        assert_eq!(s.head().map(|h| h.seq), Some(1));
        assert_eq!(s.ahead_of(3), 1);
        s.observed(1, Some(ms(40)));
        let head = *s.head().unwrap();
        assert_eq!(head.seq, 3);
        assert_eq!(
            head.head_since(),
            Some(ms(50)),
            "the latest observation ahead counts"
        );
        // Removing an observed entry keeps what it taught the others.
        s.remove(1);
        s.remove(2);
        assert_eq!(s.head().unwrap().head_since(), Some(ms(50)));
    }

    #[test]
    fn a_fence_seen_complete_proves_the_pending_runs_ahead_of_it() {
        let ms = Duration::from_millis;
        let mut s = InFlightSet::<4>::new();
        for (seq, slot) in [(1, 1), (2, 2), (3, 3), (4, 0)] {
            s.push(e(seq, slot)).unwrap();
        }
        s.get_mut(2).unwrap().proof = Proof::Unproven;
        s.observed_through(3, ms(9));
        let seen: Vec<(u64, bool)> = s.iter().map(|e| (e.seq, e.observed)).collect();
        assert_eq!(seen, [(1, true), (2, false), (3, true), (4, false)]);
        assert_eq!(s.len(), 4, "nothing leaves the set");
        assert_eq!(
            s.head().map(|h| h.seq),
            Some(2),
            "the unproven run stays the head"
        );
    }

    #[test]
    fn undated_facts_are_dated_late_never_early() {
        let ms = Duration::from_millis;
        let mut s = InFlightSet::<3>::new();
        let mut first = e(1, 0);
        first.launched_at = None; // a launch that read no clock
        s.push(first).unwrap();
        s.push(e(2, 1)).unwrap();
        assert_eq!(s.head().unwrap().head_since(), None, "not datable yet");
        s.observed(1, None); // a fast-path fence: no time read
        s.remove(1);
        assert_eq!(s.head().unwrap().head_since(), None);
        s.date(ms(70));
        assert_eq!(s.head().unwrap().head_since(), Some(ms(70)));
        s.date(ms(90)); // dating again changes nothing
        assert_eq!(s.head().unwrap().head_since(), Some(ms(70)));
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
