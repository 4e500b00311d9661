//! The a2a3 layout, defined once: every struct the a2a3 adapter
//! ([`A2a3Abi`](super::A2a3Abi)) writes or reads and the simulator's a2a3
//! device model decodes or stamps, as its list of fields. Both read the
//! offsets from here; the byte tables in [`A2a3Abi`](super::A2a3Abi)'s docs
//! are checked against these lists by a unit test, and the golden bytes of
//! the simulator's protocol tests (written by hand from the reference's
//! headers) check the lists themselves.
//!
//! **Offsets are computed, not typed.** Each struct is its fields in order,
//! each with its C type ([`CType`]); an offset is where the device's C
//! compiler puts the field — the end of the previous one rounded up to the
//! field's alignment — and a struct's size is the end of its last field
//! rounded up to its alignment (the largest of its fields', or an
//! `alignas`). The types are the device's (LP64, `AArch64`: `uint64_t` is
//! 8-aligned), written out in [`U64`] and its siblings, never the host's:
//! nothing here uses `repr(C)`, `size_of` or `align_of`. So the offsets are
//! the same on every host — on a 32-bit x86 host, whose `u64` is 4-aligned,
//! a `repr(C)` mirror of `KernelArgs` would put `enable_profiling_flag`'s
//! neighbours elsewhere and be 132 bytes, while these lists still give the
//! device's 136. Every value is far below `u16::MAX`, so no computation
//! here overflows a 16-bit `usize` either.
//!
//! **What the reference states is asserted.** Where its public headers
//! (simpler: `kernel_args.h`, `launch_entry_args.h`, `tensor.h`,
//! `runtime.h`, `device_run_result.h`) state an offset, a size or an
//! alignment, a `const` assertion after the struct pins it: a list that
//! disagrees with the header does not compile. Everything else is inferred
//! from the headers' field order and types, or is runclaim's own (a field
//! the reference does not have, marked \[runclaim\] in the docs).

/// A C type as the device lays it out: its size and alignment in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CType {
    /// Bytes.
    pub(crate) size: usize,
    /// Alignment (a power of two).
    pub(crate) align: usize,
}

/// `uint8_t`.
pub(crate) const U8: CType = CType { size: 1, align: 1 };
/// `uint32_t`.
pub(crate) const U32: CType = CType { size: 4, align: 4 };
/// `int32_t`.
pub(crate) const I32: CType = U32;
/// `uint64_t` (and a device pointer): 8-aligned on the device.
pub(crate) const U64: CType = CType { size: 8, align: 8 };

/// `T[n]`.
pub(crate) const fn array(of: CType, n: usize) -> CType {
    CType {
        size: of.size * n,
        align: of.align,
    }
}

/// `at` rounded up to a multiple of `align` (a power of two).
pub(crate) const fn align_up(at: usize, align: usize) -> usize {
    (at + align - 1) & !(align - 1)
}

/// The largest of `aligns`.
const fn largest(aligns: &[usize]) -> usize {
    let (mut i, mut max) = (0, 1);
    while i < aligns.len() {
        if aligns[i] > max {
            max = aligns[i];
        }
        i += 1;
    }
    max
}

/// One field of a struct, as the doc check reads it.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    /// The constant's name (`RUN_RESULT_EPOCH`).
    pub(crate) name: &'static str,
    /// Its offset.
    pub(crate) at: usize,
    /// Its bytes.
    pub(crate) size: usize,
}

/// A struct's module: one offset constant per field, `SIZE`, `ALIGN`,
/// `FIELDS` (the list, for the doc check) and `C` (the struct as the type
/// of a field of another), then the module's own items.
macro_rules! c_struct {
    (
        $(#[$doc:meta])*
        mod $name:ident $(alignas($alignas:expr))? {
            $($(#[$fdoc:meta])* $field:ident: $ty:expr,)+
        }
        $($item:item)*
    ) => {
        $(#[$doc])*
        pub(crate) mod $name {
            #[allow(unused_imports, reason = "the types, and the structs nested in this one")]
            use super::*;

            /// Alignment: the largest of the fields' (or the `alignas`).
            pub(crate) const ALIGN: usize = largest(&[$($alignas,)? $($ty.align,)+]);
            c_struct!(@at 0; $($(#[$fdoc])* $field: $ty,)+);
            /// Every field, in order (for the doc check).
            #[cfg(test)]
            pub(crate) const FIELDS: &[Field] =
                &[$(Field { name: stringify!($field), at: $field, size: $ty.size },)+];
            /// This struct, as the type of another's field.
            #[allow(dead_code, reason = "only a nested struct is a field")]
            pub(crate) const C: CType = CType { size: SIZE, align: ALIGN };
            $($item)*
        }
    };
    (@at $at:expr;) => {
        /// Bytes: the end of the last field, rounded up to the alignment.
        pub(crate) const SIZE: usize = align_up($at, ALIGN);
    };
    (@at $at:expr; $(#[$fdoc:meta])* $field:ident: $ty:expr, $($rest:tt)*) => {
        $(#[$fdoc])*
        pub(crate) const $field: usize = align_up($at, $ty.align);
        c_struct!(@at $field + $ty.size; $($rest)*);
    };
}

c_struct! {
    /// `AicoreLaunchArgs`, the AICore kernel's whole block. The header
    /// states the size (40) and the order ("mirrors
    /// `KERNEL_ENTRY(aicore_kernel)`'s parameter list field for field").
    mod aicore_args {
        /// The image's address.
        RUNTIME_ARGS: U64,
        ENABLE_PROFILING_FLAG: U32,
        FFTS_BASE_ADDR: U64,
        CHIP_SWIMLANE_AICORE_ROTATION_TABLE: U64,
        /// The epoch every worker reports under.
        REPORT_EPOCH: U64,
    }
}
const _: () = assert!(aicore_args::SIZE == 40);

c_struct! {
    /// `KernelArgs`, the head of the AICPU block: 14 `u64`s, then 5
    /// `u32`s. The header states `runtime_args` @0, `regs` @8,
    /// `chip_swimlane_run_terminal_bank` @40, the size (136) and the
    /// alignment (8).
    mod kernel_args {
        /// The image's address.
        RUNTIME_ARGS: U64,
        REGS: U64,
        FFTS_BASE_ADDR: U64,
        DUMP_DATA_BASE: U64,
        CHIP_SWIMLANE_DATA_BASE: U64,
        CHIP_SWIMLANE_RUN_TERMINAL_BANK: U64,
        PMU_DATA_BASE: U64,
        PMU_REG_ADDRS: U64,
        DEP_GEN_DATA_BASE: U64,
        SCOPE_STATS_DATA_BASE: U64,
        CHIP_SWIMLANE_AICORE_ROTATION_TABLE: U64,
        /// The timing region's address.
        DEVICE_WALL_DATA_BASE: U64,
        /// The result region's address.
        RUN_RESULT_DATA_BASE: U64,
        /// The epoch the run publishes under.
        RUN_RESULT_EPOCH: U64,
        ENABLE_PROFILING_FLAG: U32,
        /// Where the entry payload starts ([`envelope::HEADER`]).
        ENTRY_ARGS_OFFSET: U32,
        ENTRY_TENSOR_COUNT: U32,
        ENTRY_SCALAR_COUNT: U32,
        /// [`envelope::LAUNCH_ENVELOPE`].
        ENTRY_ARGS_SOURCE: U32,
    }

    /// The padding after the last field (to the 8-byte alignment).
    pub(crate) const PADDING: usize = ENTRY_ARGS_SOURCE + 4;
}
const _: () = assert!(kernel_args::RUNTIME_ARGS == 0 && kernel_args::REGS == 8);
const _: () = assert!(kernel_args::CHIP_SWIMLANE_RUN_TERMINAL_BANK == 40);
const _: () = assert!(kernel_args::SIZE == 136 && kernel_args::ALIGN == 8);

c_struct! {
    /// The AICPU block's header: `KernelArgs` in the reference's
    /// `LAUNCH_ENVELOPE_HEADER_BYTES` (192, stated; `sizeof(KernelArgs)`
    /// no more, stated), whose reserved bytes carry runclaim's two words;
    /// then the entry payload, T tensors ([`tensor`]) and S `u64` scalars
    /// (tensors then scalars, and the maxima, stated in
    /// `launch_entry_args.h`).
    mod envelope {
        KERNEL_ARGS: kernel_args::C,
        /// \[runclaim\]
        BLOCK_DIM: U32,
        /// \[runclaim\]
        SLOT: U32,
        RESERVED: array(U8, 48),
    }

    /// Bytes of the header: the offset of the entry payload.
    pub(crate) const HEADER: usize = SIZE;
    /// `entry_args_source` of a block carrying its arguments in the
    /// envelope (`EntryArgsSource::LaunchEnvelope`, stated).
    pub(crate) const LAUNCH_ENVELOPE: u32 = 1;
    /// Most tensors a block carries (stated).
    pub(crate) const MAX_TENSORS: usize = 256;
    /// Most scalars a block carries (stated).
    pub(crate) const MAX_SCALARS: usize = 128;
    /// Bytes per scalar.
    pub(crate) const SCALAR_SIZE: usize = U64.size;
    /// Bytes of the largest block.
    pub(crate) const MAX_SIZE: usize =
        HEADER + tensor::SIZE * MAX_TENSORS + SCALAR_SIZE * MAX_SCALARS;

    /// Bytes of a block with `t` tensors and `s` scalars; `None` above a
    /// maximum.
    pub(crate) const fn size(t: usize, s: usize) -> Option<usize> {
        if t > MAX_TENSORS || s > MAX_SCALARS {
            return None;
        }
        Some(HEADER + tensor::SIZE * t + SCALAR_SIZE * s)
    }

    /// Offset of tensor `i`'s descriptor; `None` at or beyond the maximum.
    pub(crate) const fn tensor_at(i: usize) -> Option<usize> {
        if i >= MAX_TENSORS {
            return None;
        }
        Some(HEADER + tensor::SIZE * i)
    }

    /// Offset of scalar `j` in a block of `t` tensors; `None` beyond the
    /// maxima.
    pub(crate) const fn scalar_at(t: usize, j: usize) -> Option<usize> {
        if t > MAX_TENSORS || j >= MAX_SCALARS {
            return None;
        }
        Some(HEADER + tensor::SIZE * t + SCALAR_SIZE * j)
    }
}
const _: () = assert!(envelope::HEADER == 192 && kernel_args::SIZE <= envelope::HEADER);
// The payload leads with tensors: the header is a multiple of their alignment.
const _: () = assert!(envelope::HEADER.is_multiple_of(tensor::ALIGN));
const _: () = assert!(envelope::MAX_SIZE == 33_984);

c_struct! {
    /// One tensor descriptor, `ChipTensor`-shaped. The header states the
    /// size (128), the alignment (`alignas(64)`), the order, and that
    /// `extent_elem_cache` opens the second cache line; the types are
    /// inferred. runclaim describes a 1-D tensor (`shapes[]` and
    /// `strides[]` reduced to their first entry) and adds two fields.
    mod tensor alignas(64) {
        /// `buffer.addr`: the tensor's device address.
        BUFFER_ADDR: U64,
        /// `buffer.size`: its bytes.
        BUFFER_SIZE: U64,
        OWNER_TASK_ID: U64,
        /// In elements.
        START_OFFSET: U64,
        VERSION: U32,
        NDIMS: U32,
        /// runclaim writes the element size in bytes.
        DTYPE: U32,
        MANUAL_DEP: U8,
        IS_CONTIGUOUS: U8,
        ADDRESS_SPACE: U8,
        /// [`Dir::code`](crate::driver::abi::Dir::code) \[runclaim\].
        DIRECTION: U8,
        /// `shapes[0]`: the element count.
        SHAPES: U64,
        /// 1 a staged host tensor, 0 a device buffer \[runclaim\].
        STAGED: U64,
        /// The element count.
        EXTENT_ELEM_CACHE: U64,
        /// `strides[0]`, in elements.
        STRIDES: U64,
    }

    /// The padding after the last field, to the end of the descriptor.
    pub(crate) const PADDING: usize = STRIDES + 8;
    /// `address_space` of device memory.
    pub(crate) const ADDRESS_SPACE_DEVICE: u8 = 1;
}
const _: () = assert!(tensor::SIZE == 128 && tensor::ALIGN == 64);
const _: () = assert!(tensor::EXTENT_ELEM_CACHE == 64);

c_struct! {
    /// The image region's header \[runclaim: the reference's image is its
    /// `Runtime` descriptor\]; the handshake records follow it, then the
    /// task payload.
    mod image {
        /// Epoch of the run whose AICore kernel stamped `core_start`.
        CORE_START_EPOCH: U64,
        /// Device tick the AICore kernel began.
        CORE_START: U64,
        RESERVED: array(U8, 48),
    }

    /// Bytes of the header.
    pub(crate) const HEADER: usize = SIZE;

    /// Offset of worker `w`'s handshake record; `None` when it does not
    /// fit in `usize`.
    pub(crate) const fn worker(w: u32) -> Option<usize> {
        match handshake::SIZE.checked_mul(w as usize) {
            Some(n) => HEADER.checked_add(n),
            None => None,
        }
    }

    /// Offset of the task payload in a run of `block_dim` workers.
    pub(crate) const fn payload(block_dim: u32) -> Option<usize> {
        worker(block_dim)
    }

    /// Bytes of the region for `block_dim` workers; `None` when that does
    /// not fit in `usize`.
    pub(crate) const fn bytes(block_dim: u32) -> Option<usize> {
        match payload(block_dim) {
            Some(at) => at.checked_add(payload::MAX),
            None => None,
        }
    }

    /// [`bytes`] in device-address arithmetic (saturating).
    pub(crate) const fn bytes_u64(block_dim: u32) -> u64 {
        (HEADER as u64)
            .saturating_add((handshake::SIZE as u64).saturating_mul(block_dim as u64))
            .saturating_add(payload::MAX as u64)
    }
}
const _: () = assert!(image::HEADER.is_multiple_of(handshake::ALIGN));

c_struct! {
    /// Worker `w`'s handshake record. Bytes 0..32 are the reference's
    /// `Handshake` (`runtime.h`: the order, `alignas(64)` and
    /// `report_epoch` @24 stated); bytes 32..64 lie in its padding and are
    /// runclaim's.
    mod handshake alignas(64) {
        /// Legacy, 0.
        AICPU_READY: U32,
        /// `w + 1` once worker `w` reported.
        AICORE_DONE: U32,
        /// The task payload's address.
        TASK: U64,
        CORE_TYPE: I32,
        PHYSICAL_CORE_ID: U32,
        /// Written before `aicore_done`.
        REPORT_EPOCH: U64,
        /// \[runclaim\] Written after `task`.
        TASK_EPOCH: U64,
        /// \[runclaim\]
        DONE_EPOCH: U64,
        /// \[runclaim\] Written before `done_epoch`.
        ERROR: I32,
        RESERVED: U32,
        /// \[runclaim\]
        RELEASE_EPOCH: U64,
    }

    /// `core_type` of an AIC core.
    pub(crate) const CORE_TYPE_AIC: i32 = 0;
}
const _: () = assert!(handshake::REPORT_EPOCH == 24 && handshake::SIZE == 64);

c_struct! {
    /// The task payload's header \[runclaim: device-internal, written by
    /// the AICPU kernel, read by the AICore workers\]; the tensors and
    /// scalars, copies of the AICPU block's, follow it.
    mod payload {
        EPOCH: U64,
        TENSOR_COUNT: U32,
        SCALAR_COUNT: U32,
        /// The slot (the simulator's).
        SLOT: U32,
        RESERVED: array(U8, 44),
    }

    /// Bytes of the header, and the offset of the tensors.
    pub(crate) const HEADER: usize = SIZE;
    /// Offset of the first tensor.
    pub(crate) const TENSORS: usize = HEADER;
    /// Bytes of the largest payload.
    pub(crate) const MAX: usize = HEADER
        + tensor::SIZE * envelope::MAX_TENSORS
        + envelope::SCALAR_SIZE * envelope::MAX_SCALARS;

    /// Bytes of a payload of `t` tensors and `s` scalars; `None` above a
    /// maximum.
    #[allow(dead_code, reason = "the docs' example and the tests")]
    pub(crate) const fn size(t: usize, s: usize) -> Option<usize> {
        match envelope::size(t, s) {
            Some(n) => Some(n - envelope::HEADER + HEADER),
            None => None,
        }
    }
}
const _: () = assert!(payload::SIZE == 64 && payload::MAX == 33_856);

c_struct! {
    /// The result region, `DeviceRunResultRegion` (`device_run_result.h`,
    /// its newer layout: order, types and size stated).
    mod result {
        /// The run's epoch, written and flushed last.
        PUBLISHED: U64,
        PAYLOAD_BYTES: U32,
        /// 0 None, 1 Ok, 2 Error.
        VERDICT: U32,
        COMPLETION_CODE: I32,
        /// 0 `None`, 1 `Header`, 2 `ThreadRc`, 3 `ShutdownRc`.
        CODE_SOURCE: U32,
        PAYLOAD: array(U8, 256),
    }

    /// Bytes of the header before the payload: what runclaim reads back.
    pub(crate) const HEADER: usize = PAYLOAD;
    /// `code_source`: no code.
    pub(crate) const CODE_SOURCE_NONE: u32 = 0;
    /// `code_source`: the code came from the header (the a2a3 model
    /// writes it on Error).
    pub(crate) const CODE_SOURCE_HEADER: u32 = 1;
    /// `code_source`: the last one the layout defines (`ShutdownRc`).
    pub(crate) const CODE_SOURCE_SHUTDOWN_RC: u32 = 3;
}
const _: () = assert!(result::SIZE == 280 && result::HEADER == 24);

c_struct! {
    /// The timing region, `DeviceRunTiming`-shaped \[runclaim: the
    /// reference's scalar fields, its phase arrays reduced to the three
    /// starts runclaim measures, and an epoch\].
    mod timing {
        /// \[runclaim\] Written last.
        EPOCH: U64,
        WALL_NS: U64,
        RUN_WALL_START_CYCLES: U64,
        RUN_WALL_END_CYCLES: U64,
        SYS_CNT_HZ: U64,
        DEVICE_ID: I32,
        /// \[runclaim\]
        SLOT: U32,
        /// \[runclaim\]
        AICORE_START_CYCLES: U64,
        /// \[runclaim\]
        AICPU_START_CYCLES: U64,
        /// \[runclaim\]
        DISPATCH_CYCLES: U64,
        /// \[runclaim\]
        BLOCK_DIM: U32,
        RESERVED: U32,
    }
}
const _: () = assert!(timing::SIZE == 80);

/// Every struct, by the name its table in the docs carries.
#[cfg(test)]
pub(crate) const STRUCTS: &[(&str, &[Field], usize)] = &[
    ("aicore_args", aicore_args::FIELDS, aicore_args::SIZE),
    ("kernel_args", kernel_args::FIELDS, kernel_args::SIZE),
    ("envelope", envelope::FIELDS, envelope::SIZE),
    ("tensor", tensor::FIELDS, tensor::SIZE),
    ("image", image::FIELDS, image::SIZE),
    ("handshake", handshake::FIELDS, handshake::SIZE),
    ("payload", payload::FIELDS, payload::SIZE),
    ("result", result::FIELDS, result::SIZE),
    ("timing", timing::FIELDS, timing::SIZE),
];

#[cfg(test)]
mod tests {
    use super::{Field, STRUCTS};

    /// The docs' name of a field as its constant's (`buffer.addr` →
    /// `BUFFER_ADDR`, `shapes[0]` → `SHAPES`, `KernelArgs` → `KERNEL_ARGS`).
    fn constant(doc: &str) -> String {
        let base = doc.split('[').next().unwrap_or(doc).replace('.', "_");
        let mut out = String::new();
        for (i, c) in base.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
        }
        out
    }

    /// Bytes of a scalar type as the docs write it, `None` for another
    /// cell (a count of bytes, a formula).
    fn scalar_size(ty: &str) -> Option<usize> {
        match ty {
            "u8" => Some(1),
            "u32" | "i32" => Some(4),
            "u64" => Some(8),
            _ => None,
        }
    }

    /// Checks one table's rows against the struct's fields: each row naming
    /// a field (in backticks) sits at its offset with its size, each other
    /// row (padding, reserved) covers no named field, and every named field
    /// has its row.
    fn check_table(name: &str, fields: &[Field], size: usize, rows: &[Vec<&str>]) {
        let named = |f: &&Field| !f.name.starts_with("RESERVED");
        let mut seen = Vec::new();
        for row in rows {
            let (off, ty, field) = (row[0], row[1], row[2]);
            let range = off.split_once("..").map_or_else(
                || {
                    off.parse::<usize>()
                        .map(|a| (a, a + scalar_size(ty).unwrap_or(1)))
                },
                |(a, b)| Ok((a.parse().unwrap(), b.parse().unwrap())),
            );
            let Some((from, to)) = range.ok().filter(|r| r.0 < size) else {
                continue; // what follows the struct (its arrays, at a formula)
            };
            let Some(doc_name) = field.strip_prefix('`').and_then(|f| f.split('`').next()) else {
                // Padding or reserved: no named field lies in it.
                assert!(to <= size, "{name}: the row at {off} is past the end");
                let mut inside = fields
                    .iter()
                    .filter(named)
                    .filter(|f| (from..to).contains(&f.at));
                assert!(
                    inside.next().is_none(),
                    "{name}: the row at {off} covers a field"
                );
                continue;
            };
            let c = constant(doc_name);
            let f = fields.iter().find(|f| f.name == c).unwrap_or_else(|| {
                panic!("{name}: the docs name `{doc_name}`, the layout has no {c}")
            });
            assert_eq!(f.at, from, "{name}: the docs put {c} at {from}");
            if let Some(bytes) = scalar_size(ty) {
                assert_eq!(f.size, bytes, "{name}: the docs make {c} a {ty}");
            }
            seen.push(f.name);
        }
        for f in fields.iter().filter(named) {
            assert!(
                seen.contains(&f.name),
                "{name}: the docs have no row for {}",
                f.name
            );
        }
    }

    #[test]
    fn every_table_in_the_docs_is_the_layout() {
        let doc = include_str!("layout.md");
        let mut checked = Vec::new();
        for part in doc.split("<!-- layout: ").skip(1) {
            let (name, rest) = part.split_once(" -->").unwrap();
            let rows: Vec<Vec<&str>> = rest
                .lines()
                .skip_while(|l| !l.starts_with('|'))
                .take_while(|l| l.starts_with('|'))
                .skip(2) // the head and its rule
                .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
                .collect();
            let &(_, fields, size) = STRUCTS
                .iter()
                .find(|s| s.0 == name)
                .unwrap_or_else(|| panic!("no struct {name}"));
            check_table(name, fields, size, &rows);
            checked.push(name);
        }
        let mut all: Vec<_> = STRUCTS.iter().map(|s| s.0).collect();
        checked.sort_unstable();
        all.sort_unstable();
        assert_eq!(checked, all, "one table per struct");
    }

    #[test]
    fn the_doc_check_refuses_a_table_that_moved_a_field() {
        let rows = |off| vec![vec![off, "u64", "`runtime_args`"]];
        let (_, fields, size) = STRUCTS[0];
        let moved =
            std::panic::catch_unwind(|| check_table("aicore_args", fields, size, &rows("8")));
        assert!(
            moved.is_err(),
            "a field the docs put at the wrong offset is caught"
        );
    }
}
