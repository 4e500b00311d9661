//! The blocking forms of a shared device's waits: the same future, polled
//! on the calling thread, which sleeps between looks on the fence of the
//! run the future waits for — so a driver that moves only when waited on
//! (a stepped simulator) is driven, and a real one is waited on — or, with
//! no run to wait for, until the future's waker unparks it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use super::Inner;
use crate::driver::Driver;

/// The longest sleep between two looks.
const SLICE: Duration = Duration::from_millis(1);

/// A future a blocking call drives: which device it is on, and which
/// slot's run it waits for now.
pub(super) trait Driven<D: Driver + 'static, const DEPTH: usize>: Future + Unpin {
    fn inner(&self) -> &Inner<D, DEPTH>;
    /// The slot whose run the future waits for, if it waits for one.
    fn waits_on(&self) -> Option<usize>;
}

/// Wakes the blocked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `fut` to its end on this thread.
pub(super) fn drive<D: Driver + 'static, const DEPTH: usize, F: Driven<D, DEPTH>>(
    mut fut: F,
) -> F::Output {
    // One waker per thread, made at its first blocking call: a blocking
    // call allocates nothing.
    thread_local! {
        static UNPARK: Waker = Waker::from(Arc::new(Unpark(thread::current())));
    }
    let waker = UNPARK.with(Waker::clone);
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(r) = Pin::new(&mut fut).poll(&mut cx) {
            return r;
        }
        match fut.waits_on() {
            Some(slot) => fut.inner().cell.device.idle_on(slot, SLICE),
            None => thread::park_timeout(SLICE),
        }
    }
}
