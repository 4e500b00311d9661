//! Code memory: registration (dedup of resident bytes, else an upload into a
//! free or the least recently registered unpinned address), pins, and the
//! upload stamps that make a replaced image's handle refused. An image is a
//! [`Program`] or a registered Rust kernel's [`KernelCode`]; both follow
//! the same rules.

use std::sync::Arc;

use super::{DeviceState, Image};
use crate::driver::abi::Program;
use crate::driver::sim::kernels::Code;
use crate::driver::sim::rust_kernel::{KernelCode, SimKernel};
use crate::driver::sim::trace::TraceKind;
use crate::driver::{CodeHandle, DriverErrorKind, HandleKind, Registration};

/// Code addresses: `CODE_BASE + index * CODE_STRIDE`.
const CODE_BASE: u64 = 0xc0de_0000_0000;
const CODE_STRIDE: u64 = 0x1_0000;

impl DeviceState {
    /// The code address index of `handle`, if it names the upload resident
    /// there now: an evicted or replaced upload is refused, so a launch can
    /// never run code that replaced what it registered.
    pub(super) fn code_index(&self, handle: CodeHandle) -> Result<usize, DriverErrorKind> {
        let bad = DriverErrorKind::BadHandle {
            kind: HandleKind::Code,
            raw: handle.raw(),
        };
        let off = handle.raw().checked_sub(CODE_BASE).ok_or(bad.clone())?;
        if off % CODE_STRIDE != 0 {
            return Err(bad);
        }
        let i = usize::try_from(off / CODE_STRIDE).map_err(|_| bad.clone())?;
        match self.code.get(i) {
            Some(Some(img)) if img.upload == handle.upload() => Ok(i),
            _ => Err(bad),
        }
    }

    fn code_handle(&self, i: usize) -> CodeHandle {
        let upload = self.code[i].as_ref().map_or(0, |img| img.upload);
        CodeHandle::from_raw(CODE_BASE + i as u64 * CODE_STRIDE, upload)
    }

    /// The stamp of the latest upload.
    pub fn code_epoch(&self) -> u64 {
        self.uploads
    }

    /// Decodes a code image: a [`Program`], or the image of a Rust kernel
    /// registered on this simulator.
    fn decode_code(&self, code: &[u8]) -> Result<Code, DriverErrorKind> {
        if code.starts_with(&KernelCode::MAGIC) {
            let image = KernelCode::from_bytes(code).ok_or(DriverErrorKind::InvalidCode {
                what: "a Rust kernel image is RCR1 and an 8-byte id",
            })?;
            return self
                .kernels
                .get(&image.id())
                .map(|k| Code::Rust(k.clone()))
                .ok_or(DriverErrorKind::InvalidCode {
                    what: "Rust kernel image not registered on this simulator",
                });
        }
        Program::decode(code)
            .map(|p| Code::Program(Arc::new(p)))
            .map_err(|e| DriverErrorKind::InvalidCode { what: e.as_str() })
    }

    /// Gives `kernel` a fresh id; its image is registrable from now on.
    pub fn add_kernel(&mut self, kernel: SimKernel) -> KernelCode {
        let image = KernelCode::fresh();
        self.kernels.insert(image.id(), kernel);
        image
    }

    /// Registers and pins `code`: a dedup hit on resident bytes, or an
    /// upload into a free address or the least recently registered
    /// *unpinned* one. Pinned code is never replaced.
    pub fn register_code(&mut self, code: &[u8]) -> Result<Registration, DriverErrorKind> {
        let decoded = self.decode_code(code)?;
        let stamp = self.stats.registrations + 1;
        if let Some(i) = self
            .code
            .iter()
            .position(|c| c.as_ref().is_some_and(|img| *img.bytes == *code))
        {
            self.stats.registrations += 1;
            self.code_lru[i] = stamp;
            self.code_pins[i] += 1;
            self.stats.dedup_hits += 1;
            return Ok(Registration {
                handle: self.code_handle(i),
                published: false,
            });
        }
        let free = self.code.iter().position(Option::is_none);
        let i = free
            .or_else(|| {
                (0..self.code.len())
                    .filter(|&i| self.code_pins[i] == 0)
                    .min_by_key(|&i| self.code_lru[i])
            })
            .ok_or(DriverErrorKind::CodeMemoryFull {
                capacity: self.code.len(),
            })?;
        self.stats.registrations += 1;
        self.uploads += 1;
        self.code[i] = Some(Image {
            bytes: Arc::from(code),
            code: decoded,
            upload: self.uploads,
        });
        self.code_lru[i] = stamp;
        self.code_pins[i] = 1;
        self.stats.publications += 1;
        let handle = self.code_handle(i);
        self.push_trace(0, 0, TraceKind::Published(handle));
        Ok(Registration {
            handle,
            published: true,
        })
    }

    /// Releases one pin of `handle`'s upload.
    pub fn release_code(&mut self, handle: CodeHandle) -> Result<(), DriverErrorKind> {
        let i = self.code_index(handle)?;
        if self.code_pins[i] == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "code is not pinned (released more often than registered)",
            });
        }
        self.code_pins[i] -= 1;
        Ok(())
    }

    /// The upload resident at code address `raw` now, if any.
    pub fn code_at(&self, raw: u64) -> Option<CodeHandle> {
        let off = raw.checked_sub(CODE_BASE)?;
        if off % CODE_STRIDE != 0 {
            return None;
        }
        let i = usize::try_from(off / CODE_STRIDE).ok()?;
        self.code.get(i)?.as_ref()?;
        Some(self.code_handle(i))
    }

    /// Live pins of the upload `handle` names (0 when not resident).
    pub fn code_pins(&self, handle: CodeHandle) -> u64 {
        self.code_index(handle).map_or(0, |i| self.code_pins[i])
    }
}
