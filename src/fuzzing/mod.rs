//! The fuzz targets' entry points (`fuzz/` in the repository, run with
//! `cargo fuzz`, which builds with `--cfg fuzzing`): one function per
//! target, each decoding bytes a device, a stale region or an adapter may
//! have written, and checking what the decoder promises. Not API: built
//! only under `cfg(fuzzing)` (and the crate's own tests, which run every
//! target over its seeds).
//!
//! Every target reads its input the same way: a run's identity first,
//! then a mode byte. The even modes build a *valid* value from the rest
//! of the input, encode it and decode it back (`decode(encode(x)) == x`,
//! and the same bytes under another run's identity are refused); the odd
//! modes hand the rest of the input to the decoder as it is, and check
//! that whatever it accepts is canonical — encoding what it decoded gives
//! back the bytes, on every field the layout defines — and is this run's.
//! A failed check panics: that is the fuzzer's crash.

mod blocks;
mod input;
mod records;
mod sim_a2a3;
mod sim_runclaim;

pub use self::blocks::{launch_args, work_args};
pub use self::records::{a2a3_records, records};
pub use self::sim_a2a3::sim_a2a3;
pub use self::sim_runclaim::sim_runclaim;

/// A fuzz target's entry point.
pub type Target = fn(&[u8]);

/// Every target by name, with its entry point (the names of
/// `fuzz/fuzz_targets/*.rs`).
pub const TARGETS: &[(&str, Target)] = &[
    ("records", records),
    ("a2a3_records", a2a3_records),
    ("work_args", work_args),
    ("launch_args", launch_args),
    ("sim_runclaim", sim_runclaim),
    ("sim_a2a3", sim_a2a3),
];

/// A few well-formed inputs for `target` (its seed corpus): each mode,
/// from small fixed inputs.
#[must_use]
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let modes: u8 = match target {
        "sim_runclaim" | "sim_a2a3" => 4,
        _ => 2,
    };
    let mut out = Vec::new();
    for mode in 0..modes {
        for fill in [0u8, 1, 7, 0x80] {
            let mut s = Vec::with_capacity(96);
            // The identity: run 5, epoch 5, slot 1, block_dim 2.
            s.extend_from_slice(&5u64.to_le_bytes());
            s.extend_from_slice(&5u64.to_le_bytes());
            s.extend_from_slice(&1u32.to_le_bytes());
            s.extend_from_slice(&2u32.to_le_bytes());
            s.push(mode);
            s.extend(std::iter::repeat_n(fill, 64 + usize::from(fill)));
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every target over its seeds and some raw inputs: the checks hold,
    /// and nothing panics. `RUNCLAIM_WRITE_FUZZ_SEEDS=<dir>` also writes
    /// the seeds as `<dir>/<target>/seed-<n>` (how `fuzz/corpus` is made).
    #[test]
    fn every_target_holds_over_its_seeds() {
        let dir = std::env::var_os("RUNCLAIM_WRITE_FUZZ_SEEDS");
        for &(name, target) in TARGETS {
            for (i, seed) in seeds(name).iter().enumerate() {
                target(seed);
                if let Some(dir) = &dir {
                    let d = std::path::Path::new(dir).join(name);
                    std::fs::create_dir_all(&d).unwrap();
                    std::fs::write(d.join(format!("seed-{i}")), seed).unwrap();
                }
            }
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for len in 0..300 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x.to_le_bytes()[0]
                    })
                    .collect();
                target(&bytes);
            }
        }
    }
}
