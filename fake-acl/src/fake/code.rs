//! Code registration: `rtRegisterAllKernel` and `rtDevBinaryUnRegister`,
//! and each device's registration table. A registration pins its code in
//! the simulator until it is unregistered; its handle names the device and
//! the table index, reused lowest first once free.

use std::ffi::{c_int, c_void};

use runclaim::driver::acl::RT_DEV_BINARY_MAGIC_ELF;
use runclaim::driver::acl::codes::Waited;
use runclaim::driver::{Driver, DriverError, DriverErrorKind, Op, Resource};

use super::shim::{call_out, host, opaque};
use super::{PARAM_INVALID, Program, runtime, set_message, state};

/// Program handles: `PROGRAM_TAG | device << 16 | index`, the index into
/// the device's own registration table.
const PROGRAM_TAG: u64 = 0x5eed << 48;
/// Live registrations a device's table can hold.
const PROGRAMS_PER_DEVICE: usize = 1 << 16;

/// Mirrors `rtDevBinary_t`.
#[repr(C)]
pub struct DevBinary {
    magic: u32,
    version: u32,
    data: *const c_void,
    length: u64,
}

pub(super) fn program_handle(device: i32, index: usize) -> u64 {
    PROGRAM_TAG | (u64::from(device.cast_unsigned()) << 16) | index as u64
}

/// The device and table index a program handle names (whether that entry
/// is live is the table's business).
pub(super) fn program_slot(raw: u64) -> Option<(i32, usize)> {
    if raw & !((1 << 48) - 1) != PROGRAM_TAG {
        return None;
    }
    let device = u32::try_from((raw >> 16) & 0xffff_ffff).ok()?.cast_signed();
    let index = usize::try_from(raw & 0xffff).ok()?;
    Some((device, index))
}

/// The live registration `raw` names: its device and code.
pub(super) fn program(raw: u64) -> Option<(i32, Program)> {
    let (device, i) = program_slot(raw)?;
    let code = state().programs.get(&device)?.get(i).copied().flatten()?;
    Some((device, code))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtRegisterAllKernel(
    bin: *const DevBinary,
    handle: *mut *mut c_void,
) -> c_int {
    if bin.is_null() {
        set_message("NULL binary");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtDevBinary_t (rt contract).
    let bin = unsafe { &*bin };
    if bin.magic != RT_DEV_BINARY_MAGIC_ELF {
        set_message(&format!("unsupported binary magic {:#x}", bin.magic));
        return PARAM_INVALID;
    }
    let Ok(len) = usize::try_from(bin.length) else {
        set_message("binary length does not fit the address space");
        return PARAM_INVALID;
    };
    // SAFETY: `data` readable for `length` bytes (rt contract); NULL and
    // over-long lengths refused.
    let Some(code) = (unsafe { host(bin.data, len) }) else {
        set_message("NULL binary data");
        return PARAM_INVALID;
    };
    // SAFETY: `handle` is the caller's out-pointer (rt contract).
    unsafe {
        call_out(handle, Waited::Stream, |id, s| {
            // The registration holds (pins) its code until unregistered; the
            // simulator copies the image.
            let r = s.register_code(code)?;
            let mut st = state();
            let table = st.programs.entry(id).or_default();
            let i = match table.iter().position(Option::is_none) {
                Some(i) => i,
                None if table.len() < PROGRAMS_PER_DEVICE => {
                    table.push(None);
                    table.len() - 1
                }
                None => {
                    drop(st);
                    let _ = s.release_code(r.handle);
                    return Err(DriverError::new(
                        Op::RegisterCode,
                        DriverErrorKind::NoResource {
                            what: Resource::ProgramHandle,
                        },
                    ));
                }
            };
            table[i] = Some(r.handle);
            runtime(&mut st, id).programs_registered += 1;
            Ok(opaque(program_handle(id, i)))
        })
    }
}

/// Releases a registration: its code is no longer held (a later
/// registration may replace it), and its handle may be handed out again.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtDevBinaryUnRegister(hdl: *mut c_void) -> c_int {
    let raw = hdl.addr() as u64;
    let mut st = state();
    let taken = program_slot(raw).and_then(|(device, i)| {
        let code = st.programs.get_mut(&device)?.get_mut(i)?.take()?;
        Some((device, code))
    });
    let Some((device, code)) = taken else {
        drop(st);
        set_message(&format!("unknown program handle {raw:#x}"));
        return PARAM_INVALID;
    };
    runtime(&mut st, device).programs_unregistered += 1;
    // Programs outlive a device reset; a released device has no code left.
    let sim = st
        .devices
        .get(&device)
        .map(|d| std::sync::Arc::clone(&d.sim));
    drop(st);
    if let Some(sim) = sim {
        let _ = sim.release_code(code);
    }
    0
}
