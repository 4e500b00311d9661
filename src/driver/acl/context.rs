//! Per-thread device binding: every call runs in this driver's device
//! context, restored with `aclrtSetCurrentContext` where the runtime offers
//! it, otherwise with a counted `aclrtSetDevice`.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use super::AclDriver;
use super::result::{self, Context};
use crate::driver::{DriverError, Op};

thread_local! {
    /// The driver instance that last bound this thread with `aclrtSetDevice`
    /// (0: none). No destructor, so it is readable even while the thread's
    /// other thread-locals are torn down.
    static BOUND: Cell<u64> = const { Cell::new(0) };
}

impl AclDriver {
    /// `aclrtSetDevice` on this thread, counted for the reset at drop.
    pub(super) fn set_device(&self, op: Op) -> Result<(), DriverError> {
        result::set_device(&self.api, self.device).map_err(|f| f.at(op))?;
        self.sets.fetch_add(1, Ordering::AcqRel);
        // Without a destructor this thread-local is readable even during
        // thread teardown; if it is not, the next call simply binds again.
        let _ = BOUND.try_with(|b| b.set(self.instance));
        Ok(())
    }

    /// The context `aclrtSetDevice` just made current, where the runtime
    /// offers the context API (`None` otherwise).
    pub(super) fn capture_context(&self) -> Result<Option<Context>, DriverError> {
        if self.api.set_current_context.is_none() {
            return Ok(None);
        }
        result::get_current_context(&self.api)
            .transpose()
            .map_err(|f| f.at(Op::Open))
    }

    /// Makes this driver's device context current on the calling thread.
    ///
    /// With the context API: compares the thread's current context with the
    /// captured one and restores it when they differ (whoever changed it).
    /// Without: trusts the thread's record of which driver bound it last,
    /// and calls `aclrtSetDevice` when that is not this one.
    pub(super) fn bind(&self, op: Op) -> Result<(), DriverError> {
        if let Some(ctx) = self.ctx {
            if let Some(Ok(cur)) = result::get_current_context(&self.api)
                && cur == ctx
            {
                return Ok(());
            }
            // SAFETY: a context captured from this runtime right after this
            // driver's first `aclrtSetDevice`; the device is not reset while
            // this driver holds its references (`sets` > 0 until drop, and
            // drop binds before it resets).
            let set = unsafe { result::set_current_context(&self.api, ctx) };
            // `ctx` is only captured where the symbol exists.
            return set.unwrap_or(Ok(())).map_err(|f| f.at(op));
        }
        if BOUND.try_with(Cell::get) == Ok(self.instance) {
            return Ok(());
        }
        self.set_device(op)
    }
}
