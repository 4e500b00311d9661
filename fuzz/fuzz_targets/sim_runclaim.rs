//! Fuzz target `sim_runclaim`: the checks are `runclaim::fuzzing::sim_runclaim`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runclaim::fuzzing::sim_runclaim(data));
