//! The blocking forms of a shared device's waits: the same future, driven
//! on the calling thread by `contract/sleep.rs`'s `block_on`, as every
//! blocking wait of the crate is. Each look the future makes asks the
//! thread to sleep in the driver's own blocking call on what it names
//! (a run's fence, the queue), and the answer feeds the next look; a
//! future parked on the hub (its turn, its ticket) parks the thread until
//! whoever wakes the parked (see `hub.rs`) unparks it. Before its first
//! poll, a wait for a run's completion sleeps on that run's fence: a run
//! that completes within a slice costs one call, as a typed fence does;
//! a submission first polls once arming and registering nothing, which
//! admits it at once where a lane is free.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::Inner;
use std::task::{Context, Poll, Waker};

use crate::contract::sleep::block_on;
use crate::driver::Driver;

/// A future a blocking call drives: which device it is on, and which
/// slot's run it waits for.
pub(super) trait Driven<D: Driver + 'static, const DEPTH: usize>: Future + Unpin {
    fn inner(&self) -> &Inner<D, DEPTH>;
    /// The slot whose run the future waits for, if it knows before its
    /// first poll (a ticket): the thread sleeps one slice on that slot's
    /// fence first, and the future keeps the answer ([`tell`](Self::tell)).
    fn waits_on(&self) -> Option<usize> {
        None
    }
    /// Keeps what that sleep said for the future's next look (see
    /// `Device::fence_slice`).
    fn tell(&mut self, _told: Option<bool>) {}
    /// Its output, if one poll that registers, arms and settles nothing
    /// gives it (a submission to a free lane); `None`: poll it as a wait.
    fn at_once(&mut self) -> Option<Self::Output> {
        None
    }
}

/// Polls `fut` to its end on this thread.
pub(super) fn drive<D: Driver + 'static, const DEPTH: usize, F: Driven<D, DEPTH>>(
    mut fut: F,
) -> F::Output {
    // The device outlives the future's borrow of it: its cell, shared.
    let cell = Arc::clone(&fut.inner().cell);
    let device = &cell.device;
    if let Some(slot) = fut.waits_on() {
        let told = device.fence_slice(slot);
        fut.tell(told);
        // One poll that needs nothing of the thread's sleeper ends a wait
        // whose run completed within the sleep. Only then: a poll that
        // would wait would arm and register what `block_on`'s first poll
        // arms and registers again.
        if told == Some(true)
            && let Poll::Ready(r) = Pin::new(&mut fut).poll(&mut Context::from_waker(Waker::noop()))
        {
            return r;
        }
    } else if let Some(r) = fut.at_once() {
        return r;
    }
    block_on(device, None, |cx| Pin::new(&mut fut).poll(cx))
}
