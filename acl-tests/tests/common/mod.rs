//! runclaim's shared test support (its `tests/common`), plus the `acl`
//! target over the fake runtime library.

#![allow(dead_code, reason = "each test binary uses a different subset")]

#[path = "../../../tests/common/mod.rs"]
mod shared;

pub use shared::*;

pub mod acl;
