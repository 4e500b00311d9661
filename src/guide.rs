//! The guides: longer than an item's documentation, and tested like it —
//! every code block in them runs as a doctest. Each is a page of
//! `docs/` in the repository, shown here as an empty module's docs.
//!
//! | guide | what |
//! |---|---|
//! | [`workloads`] | tensors and scalars: host slices, device buffers, per-slot and shared resources, Rust kernels; what is checked when |
//! | [`kernels`] | your own kernels and their ABI: the adapter, the two that ship, the simulator's device models, running on an NPU |
//! | [`async_and_sharing`] | awaiting runs; one device many tasks share (`SharedDevice`); closing without blocking an executor; runtime calls per run |
//! | [`acl`] | the `acl` driver: search order, symbols, codes, threads and contexts, handles, tests without an NPU |
//! | [`replay`] | captured runs: a slot's run captured once, later runs replayed with one runtime call; what is enforced, what is checked |
//! | [`performance`] | how to measure what queuing buys, and what was measured |
//! | [`testing`] | what the test suite proves, where, and how to soak it |

#[doc = include_str!("../docs/workloads.md")]
pub mod workloads {}

#[doc = include_str!("../docs/kernels.md")]
pub mod kernels {}

#[doc = include_str!("../docs/async.md")]
pub mod async_and_sharing {}

#[doc = include_str!("../docs/acl.md")]
pub mod acl {}

#[doc = include_str!("../docs/replay.md")]
pub mod replay {}

#[doc = include_str!("../docs/performance.md")]
pub mod performance {}

#[doc = include_str!("../docs/testing.md")]
pub mod testing {}
