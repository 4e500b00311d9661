//! The blocking forms of a shared device's waits: the same future, driven
//! on the calling thread by `contract/sleep.rs`'s `block_on`, as every
//! blocking wait of the crate is. Each look the future makes asks the
//! thread to sleep in the driver's own blocking call on what it names
//! (a run's fence, the queue), and the answer feeds the next look; a
//! future parked on the hub (its turn, its ticket) parks the thread until
//! whoever wakes the parked (see `hub.rs`) unparks it. Before its first
//! poll, a wait for a run's completion sleeps on that run's fence: a run
//! that completes within a slice costs one call, as a typed fence does.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::Inner;
use std::task::{Context, Poll, Waker};

use crate::contract::sleep::{Sleeps, block_on};
use crate::contract::wait::{Said, Woke};
use crate::driver::Driver;

/// A future a blocking call drives: which device it is on, and which
/// slot's run it waits for now.
pub(super) trait Driven<D: Driver + 'static, const DEPTH: usize>: Future + Unpin {
    fn inner(&self) -> &Inner<D, DEPTH>;
    /// The slot whose run the future waits for, if it waits for one.
    fn waits_on(&self) -> Option<usize>;
    /// Takes what a sleep of one slice on that slot's fence said, for its
    /// next look; `false`: it cannot (the sleep is then `block_on`'s first).
    fn tell(&mut self, _woke: &Woke) -> bool {
        false
    }
}

/// Polls `fut` to its end on this thread.
pub(super) fn drive<D: Driver + 'static, const DEPTH: usize, F: Driven<D, DEPTH>>(
    mut fut: F,
) -> F::Output {
    // The device outlives the future's borrow of it: its cell, shared.
    let cell = Arc::clone(&fut.inner().cell);
    let mut first = fut
        .waits_on()
        .and_then(|slot| cell.device.fence_sleep(slot));
    if let Some(sleep) = first {
        let woke = cell.device.sleep(sleep);
        let complete = matches!(
            woke,
            Woke::Slept {
                said: Said::Complete,
                ..
            }
        );
        if fut.tell(&woke) {
            // The future holds the answer (its next look reads it).
            first = None;
            if complete {
                // One poll that needs nothing of the thread's sleeper
                // ends it. Only then: a poll that would wait (a run not
                // complete, a full device) would arm and register what
                // `block_on`'s first poll arms and registers again.
                if let Poll::Ready(r) =
                    Pin::new(&mut fut).poll(&mut Context::from_waker(Waker::noop()))
                {
                    return r;
                }
            }
        }
    }
    block_on(&cell.device, first, |cx| Pin::new(&mut fut).poll(cx))
}
