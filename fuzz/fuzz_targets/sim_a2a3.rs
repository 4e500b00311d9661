//! Fuzz target `sim_a2a3`: the checks are `runclaim::fuzzing::sim_a2a3`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runclaim::fuzzing::sim_a2a3(data));
