//! What the runtime hands out, below every other part of this driver: the
//! opaque pointer ([`RtPtr`]) every handle and device address is, and the
//! one handle that owns host memory besides ([`Program`], with the code
//! image the runtime may keep pointing at).
//!
//! Only the `result` layer makes an [`RtPtr`] (from what a C call returned:
//! [`RtPtr::from_runtime`] is `unsafe`), so no safe code elsewhere in this
//! driver can forge a handle; the handle table holds them, and the tokens
//! its checks return (`tokens`) carry them to the `result` layer's calls.

use std::ffi::c_void;
use std::sync::{Mutex, PoisonError};

/// An opaque runtime pointer, exactly as the runtime returned it: a stream,
/// event, context, binary, function or program handle, or a device address.
/// Rust never dereferences it; it is only handed back to the runtime, with
/// the provenance the runtime gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(super) struct RtPtr(*mut c_void);

// SAFETY: an `RtPtr` is an address the runtime handed out, never
// dereferenced by Rust: sending one to another thread moves no Rust data.
// What it names is the runtime's object, which the runtime synchronizes:
// every thread that sets a device shares that device's default context
// (`aclrtSetDevice`, `acl/acl_rt.h`), its streams, events and memory are
// usable from any of them, and this driver makes each call in its device's
// context whatever thread it is on (`context.rs`).
unsafe impl Send for RtPtr {}
// SAFETY: `&RtPtr` only yields a copy of the address (no interior
// mutability); concurrent calls on one runtime object from several threads
// are the runtime's to synchronize (as above), and this driver orders the
// ones that need it (destroying, freeing) with its table's write lock.
unsafe impl Sync for RtPtr {}

impl RtPtr {
    /// What a C call returned through an out-pointer.
    ///
    /// # Safety
    /// `p` is what a call of this runtime wrote to its out-pointer, and the
    /// call succeeded: the handle (or device address) is the runtime's own,
    /// of the kind that call makes. The handle table and the tokens its
    /// checks return trust every `RtPtr` to be one.
    pub(super) unsafe fn from_runtime(p: *mut c_void) -> RtPtr {
        RtPtr(p)
    }

    /// The address as the public handle types carry it.
    pub(super) fn raw(self) -> u64 {
        self.0.addr() as u64
    }

    /// `off` bytes past this device address, with its provenance.
    pub(super) fn byte_add(self, off: u64) -> RtPtr {
        RtPtr(
            self.0
                .wrapping_byte_add(usize::try_from(off).unwrap_or(usize::MAX)),
        )
    }

    /// The pointer, to hand back to the runtime.
    pub(super) fn get(self) -> *mut c_void {
        self.0
    }

    /// A pointer made from a number, for the table's unit tests (never
    /// handed to C).
    #[cfg(any(test, fuzzing))]
    pub(super) fn from_raw(raw: u64) -> RtPtr {
        RtPtr(std::ptr::without_provenance_mut(
            usize::try_from(raw).unwrap_or(usize::MAX),
        ))
    }
}

/// A registration the runtime holds (`rtRegisterAllKernel`) and the image
/// it was made from. The runtime may keep a pointer to the image instead of
/// a copy, so the image goes only with a successful unregistration; a
/// program that is never unregistered keeps its image for the process's
/// life ([`Program::keep_forever`]).
#[derive(Debug)]
pub(super) struct Program {
    ptr: RtPtr,
    image: Box<[u8]>,
}

impl Program {
    /// The registration `ptr` the runtime made from `image` (which moves
    /// here, to live as long as the registration).
    pub(super) fn new(ptr: RtPtr, image: Box<[u8]>) -> Self {
        Program { ptr, image }
    }

    /// The runtime's handle.
    pub(super) fn ptr(&self) -> RtPtr {
        self.ptr
    }

    /// The handle, as [`CodeHandle::raw`](crate::driver::CodeHandle::raw)
    /// carries it.
    pub(super) fn raw(&self) -> u64 {
        self.ptr.raw()
    }

    /// The code it was registered from.
    pub(super) fn image(&self) -> &[u8] {
        &self.image
    }

    /// Gives the registration up without unregistering it: its image lives
    /// as long as the process.
    pub(super) fn keep_forever(self) {
        KEPT_IMAGES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.image);
    }

    /// A program the runtime never made, for the table's unit tests (never
    /// launched or unregistered).
    #[cfg(test)]
    pub(super) fn for_test(raw: u64, image: Box<[u8]>) -> Self {
        Program {
            ptr: RtPtr::from_raw(raw),
            image,
        }
    }
}

/// Code images whose registration could not be released (no
/// `rtDevBinaryUnRegister`, or it failed): the runtime may still point at
/// them, so they live as long as the process.
static KEPT_IMAGES: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());
