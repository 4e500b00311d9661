//! The claim-contract suite and the pipeline suite on the simulator, used
//! directly.

mod common;

contract_suite!(common::Sim);

pipeline_suite!(common::Sim);
