//! Why a replay was refused before any runtime call: [`ReplayRefusal`],
//! and what differs between a run and the capture it replays
//! ([`TensorDiff`]).

use std::fmt;

/// Why a run could not be captured or replayed
/// ([`ErrorKind::Replay`](super::ErrorKind::Replay)); nothing reached the
/// device, and the prepared run comes back.
///
/// ```
/// use runclaim::contract::{ErrorKind, ReplayRefusal, TensorDiff};
///
/// let k = ErrorKind::Replay(Box::new(ReplayRefusal::Tensor { index: 1, diff: TensorDiff::Binding }));
/// assert_eq!(
///     k.to_string(),
///     "replay refused: tensor 1 is bound to another device range than at capture"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReplayRefusal {
    /// The driver cannot capture ([`Capabilities::CAPTURE`](crate::driver::Capabilities::CAPTURE)
    /// is not set: the runtime lacks the capture symbols, or a fallback
    /// left it without capturable events).
    DriverCannotCapture,
    /// The kernel ABI adapter has no replayable form
    /// ([`KernelAbi::replay_block`](crate::driver::abi::KernelAbi::replay_block)).
    AdapterCannotReplay,
    /// The run's kernel is another callable than the one captured.
    Code,
    /// The adapter wrote another set of blocks than at capture (one block
    /// for both kernels, or one each).
    Blocks,
    /// The run has another number of tensors than its capture.
    TensorCount {
        /// At capture.
        captured: usize,
        /// Now.
        now: usize,
    },
    /// The run has another number of scalars than its capture.
    ScalarCount {
        /// At capture.
        captured: usize,
        /// Now.
        now: usize,
    },
    /// A tensor differs from its capture.
    Tensor {
        /// Its index.
        index: usize,
        /// How.
        diff: TensorDiff,
    },
    /// The capture is gone: a recovery replaced the streams it was
    /// captured behind, or code was uploaded on the NPU since (the code a
    /// graph captured may have been replaced). Capture again.
    Stale,
    /// The capture is another slot's, or another device's.
    Foreign,
}

/// How a tensor of a replay differs from its capture
/// ([`ReplayRefusal::Tensor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TensorDiff {
    /// Another direction (input, output, both).
    Direction,
    /// Another element size.
    ElementSize,
    /// Another kind of home (staged, arena, device buffer).
    Home,
    /// A device buffer bound to another range than at capture.
    Binding,
    /// More bytes than at capture.
    Larger {
        /// Bytes at capture.
        captured: u64,
        /// Bytes now.
        now: u64,
    },
}

impl fmt::Display for ReplayRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayRefusal::DriverCannotCapture => f.write_str("the driver cannot capture"),
            ReplayRefusal::AdapterCannotReplay => {
                f.write_str("the kernel ABI adapter has no replayable form")
            }
            ReplayRefusal::Code => f.write_str("the run's kernel is not the one captured"),
            ReplayRefusal::Blocks => {
                f.write_str("the adapter wrote another set of blocks than at capture")
            }
            ReplayRefusal::TensorCount { captured, now } => {
                write!(f, "{now} tensors, the capture has {captured}")
            }
            ReplayRefusal::ScalarCount { captured, now } => {
                write!(f, "{now} scalars, the capture has {captured}")
            }
            ReplayRefusal::Tensor { index, diff } => write!(f, "tensor {index} {diff}"),
            ReplayRefusal::Stale => f.write_str(
                "the capture is stale (a recovery, or code uploaded since): capture again",
            ),
            ReplayRefusal::Foreign => f.write_str("the capture is another slot's or device's"),
        }
    }
}

impl fmt::Display for TensorDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TensorDiff::Direction => f.write_str("has another direction than at capture"),
            TensorDiff::ElementSize => f.write_str("has another element size than at capture"),
            TensorDiff::Home => {
                f.write_str("lives elsewhere than at capture (staged, arena, buffer)")
            }
            TensorDiff::Binding => f.write_str("is bound to another device range than at capture"),
            TensorDiff::Larger { captured, now } => {
                write!(f, "has {now} bytes, more than the {captured} captured")
            }
        }
    }
}
