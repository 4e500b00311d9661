//! The process-wide timer behind [`wake_after`](crate::driver::wake_after),
//! as a protocol over the clock `T`: the armed wakes in time order, one
//! entry per task, and the timer thread's loop.
//!
//! The thread takes out what is due, wakes it with the lock released (a
//! woken task may arm again at once), then looks again; with nothing due it
//! sleeps until the earliest armed time, or, with nothing armed, until an
//! arm. Every look and the sleep that follows it happen under one hold of
//! the lock, and an arm that becomes the earliest notifies after it pushed
//! its entry under that lock: an arm either lands before the look (and is
//! seen) or after the thread sleeps (and wakes it). A re-arm of a task for
//! an earlier time takes the task's later entry out first, so the earliest
//! is judged against what stays armed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::task::Waker;

use super::{Moment, wake_all};
use crate::sync::{Condvar, Mutex, lock};

/// One armed wake. Ordered by time, then by arming order (`seq`).
struct Armed<T> {
    at: T,
    seq: u64,
    waker: Waker,
}

impl<T: Ord> PartialEq for Armed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl<T: Ord> Eq for Armed<T> {}
impl<T: Ord> PartialOrd for Armed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T: Ord> Ord for Armed<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at).then(self.seq.cmp(&other.seq))
    }
}

struct Heap<T> {
    entries: BinaryHeap<Reverse<Armed<T>>>,
    next_seq: u64,
    /// The thread is to end (the models' teardown; the process's timer
    /// never ends).
    closed: bool,
}

/// The timer's state and the condition variable its thread sleeps on.
pub(crate) struct TimerCore<T> {
    heap: Mutex<Heap<T>>,
    changed: Condvar,
}

impl<T: Moment> TimerCore<T> {
    /// Nothing armed.
    pub(crate) fn new() -> Self {
        TimerCore {
            heap: Mutex::new(Heap {
                entries: BinaryHeap::new(),
                next_seq: 0,
                closed: false,
            }),
            changed: Condvar::new(),
        }
    }

    /// Arms `waker` for `at`. A waker that `will_wake` the same task as an
    /// armed one keeps one entry, at the earlier of the two times (a task
    /// polled a million times arms one wake, not a million).
    pub(crate) fn arm(&self, at: T, waker: &Waker) {
        self.arm_with(at, waker, true);
    }

    /// An arm that never tells the thread: the models' negative control.
    #[cfg(all(test, loom))]
    pub(crate) fn arm_silently(&self, at: T, waker: &Waker) {
        self.arm_with(at, waker, false);
    }

    fn arm_with(&self, at: T, waker: &Waker, notify: bool) {
        let mut heap = lock(&self.heap);
        let mut same = heap
            .entries
            .iter()
            .filter(|Reverse(e)| e.waker.will_wake(waker))
            .map(|Reverse(e)| e.at);
        if let Some(armed) = same.next() {
            if armed <= at {
                return;
            }
            heap.entries.retain(|Reverse(e)| !e.waker.will_wake(waker));
        }
        heap.next_seq = heap.next_seq.wrapping_add(1);
        let seq = heap.next_seq;
        let earliest = heap.entries.peek().is_none_or(|Reverse(e)| at < e.at);
        heap.entries.push(Reverse(Armed {
            at,
            seq,
            waker: waker.clone(),
        }));
        drop(heap);
        if earliest && notify {
            self.changed.notify_one();
        }
    }

    /// The timer thread: wakes what is due on `now`'s clock, sleeps until
    /// the next, and with nothing armed sleeps until something is. Returns
    /// only once [`close`](Self::close)d.
    pub(crate) fn run(&self, now: impl Fn() -> T) {
        let mut heap = lock(&self.heap);
        while !heap.closed {
            let now = now();
            let mut due = Vec::new();
            while heap.entries.peek().is_some_and(|Reverse(e)| e.at <= now) {
                if let Some(Reverse(e)) = heap.entries.pop() {
                    due.push(e.waker);
                }
            }
            if !due.is_empty() {
                // Wake outside the lock: a waker may arm again at once.
                drop(heap);
                wake_all(due);
                heap = lock(&self.heap);
                continue;
            }
            heap = match heap.entries.peek().map(|Reverse(e)| e.at) {
                Some(at) => self
                    .changed
                    .wait_timeout(heap, now.until(at))
                    .map_or_else(|e| e.into_inner().0, |(g, _)| g),
                None => self
                    .changed
                    .wait(heap)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            };
        }
    }

    /// Ends [`run`](Self::run) (the models' teardown).
    #[cfg(all(test, loom))]
    pub(crate) fn close(&self) {
        lock(&self.heap).closed = true;
        self.changed.notify_one();
    }

    /// Wakes armed now.
    #[cfg(all(test, loom))]
    pub(crate) fn armed(&self) -> usize {
        lock(&self.heap).entries.len()
    }
}
