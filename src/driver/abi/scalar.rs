//! A scalar argument's encoding: any [`Pod`] value of 1 to 8 bytes in one
//! 64-bit slot of the argument block — its bytes in the slot's low bytes,
//! the rest zero (the slot is little-endian, as the device is: on a
//! little-endian host an `f32`, an `i32` or a `u16` is its bits
//! zero-extended). The host encodes with [`scalar_bits`]
//! ([`Workload::scalar`](crate::Workload::scalar) does), a kernel or an
//! adapter decodes with [`scalar_from_bits`].

use bytemuck::Pod;

/// `value`'s bytes in the low bytes of a 64-bit scalar slot, zero-extended.
///
/// ```
/// use runclaim::driver::abi::{scalar_bits, scalar_from_bits};
/// use half::f16;
///
/// assert_eq!(scalar_bits(1.5f32), u64::from(1.5f32.to_bits()));
/// // Zero-extended, not sign-extended: `-1i32 as u64` is all ones.
/// assert_eq!(scalar_bits(-1i32), 0xffff_ffff);
/// assert_eq!(scalar_bits(f16::ONE), u64::from(f16::ONE.to_bits()));
/// assert_eq!(scalar_from_bits::<i32>(scalar_bits(-7i32)), -7);
/// ```
///
/// A type of more than 8 bytes (or none) does not compile:
///
/// ```compile_fail,E0080
/// let _ = runclaim::driver::abi::scalar_bits(1u128);
/// ```
///
/// ```
/// let _ = runclaim::driver::abi::scalar_bits(1u64);
/// ```
#[must_use]
#[inline]
pub fn scalar_bits<T: Pod>(value: T) -> u64 {
    const {
        assert!(
            size_of::<T>() > 0 && size_of::<T>() <= 8,
            "a scalar is 1 to 8 bytes"
        );
    }
    let mut slot = [0u8; 8];
    slot[..size_of::<T>()].copy_from_slice(bytemuck::bytes_of(&value));
    u64::from_le_bytes(slot)
}

/// The `T` a scalar slot holds: its low `size_of::<T>()` bytes (what
/// [`scalar_bits`] wrote; the high bytes are ignored).
///
/// ```
/// use runclaim::driver::abi::{scalar_bits, scalar_from_bits};
/// assert_eq!(scalar_from_bits::<f32>(scalar_bits(0.25f32)), 0.25);
/// assert_eq!(scalar_from_bits::<u8>(0x1234), 0x34);
/// ```
///
/// ```compile_fail,E0080
/// let _: [u64; 2] = runclaim::driver::abi::scalar_from_bits(0);
/// ```
#[must_use]
#[inline]
pub fn scalar_from_bits<T: Pod>(bits: u64) -> T {
    const {
        assert!(
            size_of::<T>() > 0 && size_of::<T>() <= 8,
            "a scalar is 1 to 8 bytes"
        );
    }
    bytemuck::pod_read_unaligned(&bits.to_le_bytes()[..size_of::<T>()])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width round-trips, zero-extended (a negative value's high
    /// bytes are zero, where `as u64` would sign-extend), and the bytes
    /// of the unchanged cases (`u64`, `u32`) are what `as u64` gave.
    #[test]
    fn scalars_round_trip_zero_extended() {
        assert_eq!(scalar_bits(u64::MAX), u64::MAX);
        assert_eq!(scalar_bits(7u32), 7);
        assert_eq!(scalar_bits(-2i8), 0xfe);
        assert_eq!(scalar_bits(-2i16), 0xfffe);
        assert_eq!(scalar_bits(-2i32), 0xffff_fffe);
        // What `as u64` gave (sign-extended), which typed scalars change.
        assert_ne!(scalar_bits(-2i32), u64::MAX - 1, "not sign-extended");
        assert_eq!(scalar_bits(-2i64), u64::MAX - 1);
        assert_eq!(scalar_bits(-0.5f64), (-0.5f64).to_bits());
        assert_eq!(scalar_from_bits::<i8>(scalar_bits(-2i8)), -2);
        assert_eq!(scalar_from_bits::<i16>(scalar_bits(i16::MIN)), i16::MIN);
        assert_eq!(
            scalar_from_bits::<f32>(scalar_bits(f32::MIN)).to_bits(),
            f32::MIN.to_bits()
        );
        assert_eq!(
            scalar_from_bits::<[u8; 3]>(scalar_bits([1u8, 2, 3])),
            [1, 2, 3]
        );
        // The high bytes are ignored on the way back.
        assert_eq!(scalar_from_bits::<u16>(0xdead_0007), 7);
    }
}
