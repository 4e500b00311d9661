#![allow(dead_code, reason = "each example uses a subset")]

//! When a task is woken: [`Stamped`] wraps a future and notes the instant
//! of the latest wake of the waker it hands the future — what the async
//! examples measure wake-up latency with.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// The instant wakes are measured from.
static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// Fixes the origin of the stamps (call before the first wake).
pub fn origin() -> Instant {
    *ORIGIN.get_or_init(Instant::now)
}

/// A future that notes when its task is woken.
pub struct Stamped<F> {
    fut: F,
    woke: Arc<Stamp>,
}

/// The latest wake's instant, and the task's own waker to pass it on to.
pub struct Stamp {
    inner: Mutex<Option<Waker>>,
    at: AtomicU64,
}

impl<F> Stamped<F> {
    /// `fut`, stamped.
    pub fn new(fut: F) -> Self {
        origin();
        Stamped {
            fut,
            woke: Arc::new(Stamp {
                inner: Mutex::new(None),
                at: AtomicU64::new(u64::MAX),
            }),
        }
    }

    /// The stamp, to read after the future resolved.
    pub fn stamp(&self) -> Arc<Stamp> {
        Arc::clone(&self.woke)
    }
}

impl Stamp {
    /// The latest wake, `None` if the future was never woken (it was
    /// ready at its first poll).
    pub fn woken_at(&self) -> Option<Instant> {
        let at = self.at.load(Ordering::Acquire);
        (at != u64::MAX).then(|| origin() + Duration::from_nanos(at))
    }
}

impl Wake for Stamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let ns = u64::try_from(origin().elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.at.store(ns, Ordering::Release);
        if let Some(w) = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            w.wake_by_ref();
        }
    }
}

impl<F: Future + Unpin> Future for Stamped<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        *self
            .woke
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(cx.waker().clone());
        let waker = Waker::from(self.woke.clone());
        Pin::new(&mut self.fut).poll(&mut Context::from_waker(&waker))
    }
}
