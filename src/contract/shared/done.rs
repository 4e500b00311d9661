//! What a shared device's ticket resolves to: [`Done`], a finished run,
//! or the error with its workload handed back.

use crate::contract::error::{Error, RunId};
use crate::contract::workload::Workload;
use crate::driver::abi::WallRecord;

/// A finished run of a [`SharedDevice`](super::SharedDevice): its records,
/// a [`RunSpec`](crate::RunSpec) run's outputs, and a workload's run's
/// workload, its owned host tensors holding what the device wrote.
#[derive(Debug)]
#[non_exhaustive]
pub struct Done {
    /// The run.
    pub run: RunId,
    /// Its launch sequence number (admission order is launch order).
    pub seq: u64,
    /// Its device-wall record (validated to be this run's).
    pub wall: WallRecord,
    /// A [`RunSpec`](crate::RunSpec) run's outputs (empty for a
    /// workload's run).
    pub values: Vec<u32>,
    /// A workload's run's workload, to read, refill and submit again.
    pub work: Option<Workload<'static>>,
}

/// What a ticket resolves to: the finished run, or why it produced no
/// result, with its workload handed back.
pub(super) type Delivery = Result<Done, Error<Option<Workload<'static>>>>;
