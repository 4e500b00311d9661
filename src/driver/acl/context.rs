//! Per-thread device binding: every call runs in this driver's device
//! context, restored with `aclrtSetCurrentContext` where the runtime offers
//! it, otherwise with a counted `aclrtSetDevice`.

use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

use super::AclDriver;
use super::call::{addr, handle};
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
        // SAFETY: plain integer argument.
        let rc = unsafe { (self.api.set_device)(self.device) };
        self.check(op, "aclrtSetDevice", rc)?;
        self.sets.fetch_add(1, Ordering::AcqRel);
        // Without a destructor this thread-local is readable even during
        // thread teardown; if it is not, the next call simply binds again.
        let _ = BOUND.try_with(|b| b.set(self.instance));
        Ok(())
    }

    /// The context `aclrtSetDevice` just made current, where the runtime
    /// offers the context API (0 otherwise).
    pub(super) fn capture_context(&self) -> Result<u64, DriverError> {
        let (Some(get), Some(_)) = (self.api.get_current_context, self.api.set_current_context)
        else {
            return Ok(0);
        };
        let mut ctx = null_mut();
        // SAFETY: `ctx` is a valid out-pointer.
        let rc = unsafe { get(&raw mut ctx) };
        self.check(Op::Open, "aclrtGetCurrentContext", rc)?;
        Ok(addr(ctx))
    }

    /// Makes this driver's device context current on the calling thread.
    ///
    /// With the context API: compares the thread's current context with the
    /// captured one and restores it when they differ (whoever changed it).
    /// Without: trusts the thread's record of which driver bound it last,
    /// and calls `aclrtSetDevice` when that is not this one.
    pub(super) fn bind(&self, op: Op) -> Result<(), DriverError> {
        if self.ctx != 0
            && let (Some(get), Some(set)) =
                (self.api.get_current_context, self.api.set_current_context)
        {
            let mut cur = null_mut();
            // SAFETY: `cur` is a valid out-pointer.
            let rc = unsafe { get(&raw mut cur) };
            if rc == 0 && addr(cur) == self.ctx {
                return Ok(());
            }
            // SAFETY: a context captured from this runtime; the device it
            // belongs to is not reset while this driver holds its reference
            // (`sets` > 0 until drop).
            let rc = unsafe { set(handle(self.ctx)) };
            return self.check(op, "aclrtSetCurrentContext", rc);
        }
        if BOUND.try_with(Cell::get) == Ok(self.instance) {
            return Ok(());
        }
        self.set_device(op)
    }
}
