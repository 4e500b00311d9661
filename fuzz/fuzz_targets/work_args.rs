//! Fuzz target `work_args`: the checks are `runclaim::fuzzing::work_args`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runclaim::fuzzing::work_args(data));
