//! Fuzz target `launch_args`: the checks are `runclaim::fuzzing::launch_args`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runclaim::fuzzing::launch_args(data));
