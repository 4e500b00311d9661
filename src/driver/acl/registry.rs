//! Code registrations beyond one call: the upload stamps and counts every
//! `AclDriver` on a device shares, unregistering code, and the images kept
//! for the process's life when the runtime cannot let go of them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::AclDriver;
use super::call::handle;
use super::table::Resident;

/// What every `AclDriver` on one device id shares, for the process's life.
#[derive(Debug, Default)]
pub(super) struct DeviceShared {
    /// Upload stamps ([`CodeHandle::upload`]): unique and increasing per
    /// device, across every driver instance on it.
    ///
    /// [`CodeHandle::upload`]: crate::driver::CodeHandle::upload
    pub(super) uploads: AtomicU64,
    /// Registrations the drivers of this process hold on the device (what
    /// a full code memory is reported as holding).
    pub(super) programs: AtomicUsize,
}

pub(super) fn device_shared(device: i32) -> Arc<DeviceShared> {
    static DEVICES: Mutex<Vec<(i32, Arc<DeviceShared>)>> = Mutex::new(Vec::new());
    let mut all = DEVICES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, s)) = all.iter().find(|(d, _)| *d == device) {
        return Arc::clone(s);
    }
    let s = Arc::new(DeviceShared::default());
    all.push((device, Arc::clone(&s)));
    s
}

/// Code images whose registration could not be released (no
/// `rtDevBinaryUnRegister`, or it failed): the runtime may still point at
/// them, so they live as long as the process.
static KEPT_IMAGES: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());

pub(super) fn keep_forever(image: Box<[u8]>) {
    KEPT_IMAGES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(image);
}

impl AclDriver {
    /// Unregisters a registration and frees its image once the runtime let
    /// go of it; without `rtDevBinaryUnRegister`, or when it fails, the image
    /// is kept for the process's life instead. Returns whether it was
    /// unregistered. The caller holds the write lock and a bound thread.
    pub(super) fn unregister(&self, r: Resident) -> bool {
        let released = self.api.dev_binary_unregister.is_some_and(|unregister| {
            // SAFETY: `r.raw` came from rtRegisterAllKernel and is
            // unregistered once: the entry was taken out of the table.
            let rc = unsafe { unregister(handle(r.raw)) };
            rc == 0
        });
        if released {
            self.shared.programs.fetch_sub(1, Ordering::AcqRel);
            drop(r.image);
        } else {
            keep_forever(r.image);
        }
        released
    }
}
