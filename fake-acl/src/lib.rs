//! A fake `libascendcl.so` + `libruntime.so`: the ACL / libruntime C symbols
//! the `runclaim` acl driver uses, implemented on runclaim's simulated NPU,
//! so the real `libloading` path — symbol resolution, C structs, error codes,
//! per-thread device context — is tested on every machine.
//!
//! Each device id is its own simulated NPU, configured through the control
//! API ([`control`]) before `aclrtSetDevice` creates it (stepped mode with the
//! default configuration otherwise). Like the real runtime, every call needs
//! the calling thread bound to a device (`aclrtSetDevice`), else it returns
//! 107002. `RUNCLAIM_FAKE_MODE=realtime` makes unconfigured devices real-time.

pub mod control;
mod fake;
