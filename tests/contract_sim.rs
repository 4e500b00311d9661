//! The claim-contract suite on the simulator, used directly.

mod common;

contract_suite!(common::Sim);
