#![allow(dead_code, reason = "each example uses a subset")]

//! One executor thread awaiting many tasks: [`join_all`] over `pollster`'s
//! `block_on`. Shared by the async examples and the async tests (which
//! include this file by path).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Every future to completion on the calling thread, polled together (each
/// poll of the join polls every one not done): what one executor thread
/// awaiting many tasks does.
pub fn join_all<'a, R>(futs: Vec<Pin<Box<dyn Future<Output = R> + 'a>>>) -> Vec<R> {
    struct Join<'a, R> {
        futs: Vec<Option<Pin<Box<dyn Future<Output = R> + 'a>>>>,
        out: Vec<Option<R>>,
    }
    // Nothing is pinned in place: the futures are boxed, results moved.
    impl<R> Unpin for Join<'_, R> {}
    impl<R> Future for Join<'_, R> {
        type Output = Vec<R>;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<R>> {
            // Every field is `Unpin` (boxed futures, options).
            let this = self.get_mut();
            for (slot, out) in this.futs.iter_mut().zip(this.out.iter_mut()) {
                if let Some(fut) = slot
                    && let Poll::Ready(r) = fut.as_mut().poll(cx)
                {
                    *out = Some(r);
                    *slot = None;
                }
            }
            if this.futs.iter().all(Option::is_none) {
                Poll::Ready(this.out.iter_mut().filter_map(Option::take).collect())
            } else {
                Poll::Pending
            }
        }
    }
    let n = futs.len();
    pollster::block_on(Join {
        futs: futs.into_iter().map(Some).collect(),
        out: (0..n).map(|_| None).collect(),
    })
}
