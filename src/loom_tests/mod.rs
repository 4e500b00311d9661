//! The loom models of the crate's wake protocols, gathered as tokio
//! gathers its own (`src/runtime/tests/loom_*.rs`), apart from the
//! production files: built only for `cargo test` under
//! `RUSTFLAGS="--cfg loom"`, which `.ci/loom` runs (each model, then each
//! negative control, which must fail with loom's deadlock).
//!
//! | file | the protocol |
//! |---|---|
//! | `task.rs` | a task a model's threads wake (the models' executor) |
//! | `nap.rs` | the simulator's real-time thread napping between tasks (`driver/wake/nap.rs`) |
//! | `reactor.rs` | the acl driver's report thread (`driver/wake/reactor.rs`) |
//! | `timer.rs` | the shared timer (`driver/wake/timer.rs`) |
//! | `last_drop.rs` | a shared device's last drop, paid on a thread of its own (`crate::sync::pay_elsewhere`) |
//! | `admission.rs` | a shared device's admission after a failed fence (a protocol model of `contract/shared/recovery.rs`) |

use std::time::Instant;

mod admission;
mod last_drop;
mod nap;
mod reactor;
mod task;
mod timer;

/// Runs the loom model `f` under `name`, printing how many interleavings
/// it explored and how long it took (or, when it fails, at which).
pub(crate) fn check(name: &'static str, f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static ITERATIONS: AtomicUsize = AtomicUsize::new(0);
    ITERATIONS.store(0, Relaxed);
    let start = Instant::now();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // Loom ends a model's threads with panics of its own (no message):
        // only a failure's message is reported.
        let p = info.payload();
        if p.downcast_ref::<&str>().is_none() && p.downcast_ref::<String>().is_none() {
            return;
        }
        let n = ITERATIONS.load(Relaxed);
        eprintln!(
            "loom model {name}: failed in iteration {n} after {:.2?}",
            start.elapsed()
        );
        previous(info);
    }));
    loom::model(move || {
        ITERATIONS.fetch_add(1, Relaxed);
        f();
    });
    drop(std::panic::take_hook());
    let n = ITERATIONS.load(Relaxed);
    eprintln!(
        "loom model {name}: {n} iterations in {:.2?}",
        start.elapsed()
    );
}
