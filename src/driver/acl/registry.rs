//! Code registrations: registering and pinning (`rtRegisterAllKernel`),
//! releasing pins, the upload stamps and counts every `AclDriver` on a
//! device shares, unregistering code (a program the runtime cannot let go
//! of keeps its image for the process's life: `Program::keep_forever`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::AclDriver;
use super::notify::DeviceNotify;
use super::result;
use super::table::Resident;
use crate::driver::{CodeHandle, DriverError, DriverErrorKind, HandleKind, Op, Registration};

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
    /// The device's drivers and its completion-notification reactor
    /// (`notify`).
    pub(super) notify: DeviceNotify,
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

impl AclDriver {
    /// Unregisters a registration and frees its image once the runtime let
    /// go of it; without `rtDevBinaryUnRegister`, or when it fails, the image
    /// is kept for the process's life instead. Returns whether it was
    /// unregistered. The caller holds the write lock and a bound thread.
    pub(super) fn unregister(&self, r: Resident) -> bool {
        match result::dev_binary_unregister(&self.api, r.program) {
            Ok(()) => {
                self.shared.programs.fetch_sub(1, Ordering::AcqRel);
                true
            }
            Err(kept) => {
                kept.keep_forever();
                false
            }
        }
    }
}

impl AclDriver {
    /// `Driver::register_code`: a dedup hit pins again; new code first lets
    /// go of this driver's unpinned registrations, then registers and pins.
    pub(super) fn register(&self, code: &[u8]) -> Result<Registration, DriverError> {
        let mut t = self.write();
        if let Some(r) = t.code.iter_mut().find(|r| r.program.image() == code) {
            r.pins += 1;
            return Ok(Registration {
                handle: CodeHandle::from_raw(r.raw(), r.upload),
                published: false,
            });
        }
        self.bind(Op::RegisterCode)?;
        // New code: first let go of this driver's unpinned registrations
        // (the trait lets unpinned code be evicted by a later registration),
        // so code memory holds only what someone still pins.
        let (unpinned, pinned): (Vec<_>, Vec<_>) = std::mem::take(&mut t.code)
            .into_iter()
            .partition(|r| r.pins == 0);
        t.code = pinned;
        for r in unpinned {
            self.unregister(r);
        }
        // The image lives as long as its registration (the runtime may keep
        // a pointer to it instead of a copy): the `Program` owns it.
        let program = result::register_all_kernel(&self.api, code.into()).map_err(|f| {
            let f = match f.kind() {
                // The runtime does not say how much it holds: report what
                // the drivers of this process hold on the device (a lower
                // bound when other components register code too).
                DriverErrorKind::CodeMemoryFull { .. } => {
                    f.with_kind(DriverErrorKind::CodeMemoryFull {
                        capacity: self.shared.programs.load(Ordering::Acquire),
                    })
                }
                _ => f,
            };
            f.at(Op::RegisterCode)
        })?;
        self.shared.programs.fetch_add(1, Ordering::AcqRel);
        let raw = program.raw();
        let upload = self.shared.uploads.fetch_add(1, Ordering::AcqRel) + 1;
        t.code.push(Resident {
            program,
            upload,
            pins: 1,
        });
        Ok(Registration {
            handle: CodeHandle::from_raw(raw, upload),
            published: true,
        })
    }

    /// `Driver::release_code`: one pin fewer; the registration itself goes
    /// when this driver next uploads new code, or at drop.
    pub(super) fn release(&self, code: CodeHandle) -> Result<(), DriverError> {
        let mut t = self.write();
        let i = t
            .code
            .iter()
            .position(|r| r.raw() == code.raw() && r.upload == code.upload())
            .ok_or_else(|| {
                DriverError::new(
                    Op::ReleaseCode,
                    DriverErrorKind::BadHandle {
                        kind: HandleKind::Code,
                        raw: code.raw(),
                    },
                )
            })?;
        let r = &mut t.code[i];
        if r.pins == 0 {
            return Err(DriverError::new(
                Op::ReleaseCode,
                DriverErrorKind::InvalidArgument {
                    what: "code is not pinned (released more often than registered)",
                },
            ));
        }
        // Unpinned code stays registered and launchable until this driver
        // uploads new code or drops.
        r.pins -= 1;
        Ok(())
    }
}
