//! The awaited waits on the simulator: the async suite (real time), and
//! what only the simulator can show deterministically — a stepped device
//! moves only when driven, cancellation at every poll, the instant driver
//! and a driver without notifications.

mod common;

async_suite!(common::Sim);
