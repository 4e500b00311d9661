//! Fuzz target `a2a3_records`: the checks are `runclaim::fuzzing::a2a3_records`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runclaim::fuzzing::a2a3_records(data));
