//! runclaim — queue consecutive Ascend NPU runs on one stream pair.

pub mod driver;

pub use driver::sim;
