//! The awaited waits through the `acl` driver over the fake runtime
//! library: the async suite (`tests/common/async_suite.rs`), woken by the
//! driver's reactor (the host callback behind each fence, the exception
//! callback, the deadline).

mod common;

async_suite!(common::acl::Acl);
