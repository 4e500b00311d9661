//! The claim contract: runs move through `Prepared → Launched → Fenced →
//! Finalized`, up to `DEPTH` of them launched at once on one stream pair.
//!
//! | type | what it is |
//! |---|---|
//! | [`Device`] | driver, stream pair, per-slot device regions, code registry |
//! | [`Runner`] | one published code generation; issues tokens, prepares runs |
//! | [`SlotToken`] | the one capability to use slot `I` |
//! | [`Run`] | a run in slot `I`, in state [`Prepared`], [`Launched`] or [`Fenced`] |
//! | [`Capture`] | slot `I`'s run captured into a graph: later runs replayed with one runtime call |
//! | [`Finalized`] | a finished run's records and its token, handed back |
//! | [`Workload`] | a run's tensors (host slices, device buffers) and scalars |
//! | [`DeviceBuffer`] | typed device memory that outlives code generations |
//! | [`Pipeline`] | all of a runner's slots kept busy: submit specs, complete results in order |
//! | [`SharedDevice`] | one device many tasks share: owned, cloneable, `'static`; each submission its own [`Ticket`] |
//! | [`FenceFuture`], [`DrainFuture`], [`CompleteFuture`], … | a fence, a drain, a pipeline's completion awaited: no thread parked on the device |
//!
//! See the [crate documentation](crate) for the rules and what enforces each.

mod buffer;
mod capture;
mod code;
mod completed;
mod config;
mod device;
mod error;
mod inflight;
mod lane;
mod outputs;
mod pipeline;
mod port;
mod prepare;
mod publish;
mod replay;
mod run;
mod runner;
mod shared;
mod sleep;
mod slot;
mod spec;
mod states;
mod wait;
mod workload;

pub use buffer::{BufferSlice, DeviceBuffer, PerSlot, Scratch, SlotBuffer};
pub use capture::Capture;
pub use code::{Callable, CodeRef};
pub use completed::{Completed, Done, Values};
pub use config::{ConfigError, DeviceConfig};
pub use device::{CloseFuture, ContractStats, Device, DrainReport, Health, LostCause};
pub use error::{
    Action, BufferId, Error, ErrorKind, Poison, PoisonCause, Record, ReplayRefusal, RunId,
    TensorDiff, WithoutValue,
};
pub use outputs::{Finalized, Outputs};
pub use pipeline::{CompleteFuture, Pipeline, PipelineDrainFuture, Rejected, Submit, Unfinished};
pub use prepare::Spec;
pub use run::FenceFuture;
pub use run::Run;
pub use runner::DrainFuture;
pub use runner::Runner;
pub use shared::{
    AnySharedDevice, PublishFuture, SharedCloseFuture, SharedDevice, SubmitFuture, Ticket,
};
pub use slot::{Depth, Slot, SlotOf, SlotSet, SlotToken, SupportedDepth};
pub use spec::{Input, RunSpec};
pub use states::{Fenced, Launched, Prepared, State};
pub use workload::{Bindings, NoWorkload, OwnedId, TensorId, TensorIndex, WithWorkload, Workload};
