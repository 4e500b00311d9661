//! A fake `libascendcl.so` + `libruntime.so`: the ACL / libruntime C symbols
//! the `runclaim` acl driver uses, implemented on runclaim's simulated NPU,
//! so the real `libloading` path — symbol resolution, C structs, error codes,
//! per-thread device context — is tested on every machine.
//!
//! Each device id is its own simulated NPU, configured through the control
//! API ([`control`]) before `aclrtSetDevice` creates it (stepped mode with the
//! default configuration otherwise). Like the real runtime, every call needs
//! the calling thread bound to a device (`aclrtSetDevice`), else it returns
//! 107002. `RUNCLAIM_FAKE_MODE=realtime` makes unconfigured devices real-time,
//! `RUNCLAIM_FAKE_WATCHDOG_MS=N` gives them an N ms device watchdog.
//!
//! # Kernel protocols
//!
//! A fake device speaks one of runclaim's built-in kernel protocols, as
//! its simulator's [`DeviceModel`](runclaim::sim::DeviceModel):
//! runclaim's own (the default) or the reference runtime's a2a3 layout,
//! chosen per device with `runclaim_fake_device_model(device, "a2a3")`
//! before the device is opened — to be driven by a
//! `Device` opened with `DeviceConfig::kernel_abi(A2a3Abi)`. The launches
//! pass the adapter's bytes through unchanged; the device decodes them, so
//! a block of the other protocol is refused at launch (107000).
//!
//! # Limits
//!
//! - **Built-in protocols only.** A user `DeviceModel` is a Rust value of
//!   the test process; the library, loaded with its own copy of runclaim,
//!   cannot reach it. User models stay simulator-only
//!   (`SimConfig::device_model`).
//! - **Programs only.** An AICore image the fake runs is a
//!   [`Program`](runclaim::driver::abi::Program) (code bytes). A Rust
//!   kernel image (`SimDriver::register_kernel`) names a function
//!   registered in the test process's simulator, which the library cannot
//!   reach either: Rust kernels stay simulator-only.

pub mod control;
mod fake;
