//! What the driver's methods share besides the C calls: elapsed times as
//! durations, the table's locks, the `block_dim` check.

use std::sync::{PoisonError, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use super::AclDriver;
use super::table::Table;
use crate::driver::{DriverError, DriverErrorKind, Op};

/// An elapsed time the runtime reported, in ms, as a `Duration`.
pub(super) fn elapsed_of(ms: f32) -> Result<Duration, &'static str> {
    if ms.is_nan() {
        return Err("elapsed time is NaN");
    }
    if ms < 0.0 {
        return Err("elapsed time is negative (end recorded before start?)");
    }
    Duration::try_from_secs_f64(f64::from(ms) / 1000.0)
        .map_err(|_| "elapsed time is infinite or too large")
}

impl AclDriver {
    // ----- locks ------------------------------------------------------------

    pub(super) fn read(&self) -> RwLockReadGuard<'_, Table> {
        // Nothing panics while the table is locked; if something did, the
        // table is still what this driver knows.
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn block_dim_ok(&self, op: Op, block_dim: u32) -> Result<(), DriverError> {
        if block_dim == 0 || block_dim > self.max_block_dim {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "block_dim is 0 or above the device maximum",
                },
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_times_from_the_runtime_never_panic() {
        assert_eq!(elapsed_of(1.5), Ok(Duration::from_micros(1500)));
        assert_eq!(elapsed_of(0.0), Ok(Duration::ZERO));
        for bad in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1.0,
            f32::MAX,
            f32::MIN,
        ] {
            assert!(elapsed_of(bad).is_err(), "{bad}");
        }
        assert!(elapsed_of(1e15).is_ok(), "large but representable");
    }
}
