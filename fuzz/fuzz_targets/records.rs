//! Fuzz target `records`: the checks are `runclaim::fuzzing::records`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runclaim::fuzzing::records(data));
