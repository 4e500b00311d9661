//! Addresses are checked per driver on the acl driver too: two
//! `AclDriver`s on one fake device id — two devices sharing one NPU — run
//! the simulator's scenario (`tests/common/foreign.rs`, run there by
//! `tests/ownership.rs` on clones of one `SimDriver`). Device A's user
//! adapter names device B's buffer as its handshake region: the runtime
//! would take the address (the memory is the process's on that device),
//! but the driver's table holds only what this driver allocated, so the
//! launch is refused before any C call and B's bytes stay; naming A's own
//! buffer, the same adapter runs.

mod common;

use std::time::Duration;

use common::acl::{FakeAcl, open, open_on};
use common::foreign::{Whose, is_bad_address, run_with_borrowed_handshake};
use runclaim::sim::SimConfig;

/// Two drivers on one freshly configured fake device.
fn two_on_one() -> (FakeAcl, FakeAcl) {
    let watchdog = Duration::from_millis(50);
    let a = open(&SimConfig::default().watchdog(watchdog), false);
    let b = open_on(a.device_id(), watchdog);
    assert_eq!(a.device_id(), b.device_id(), "one NPU");
    (FakeAcl::new(a), FakeAcl::new(b))
}

#[test]
fn a_launch_naming_another_drivers_buffer_is_refused() {
    let (a, b) = two_on_one();
    let outcome = run_with_borrowed_handshake(a, b, Whose::Other);
    match &outcome.launch {
        Err(kind) => {
            assert!(
                is_bad_address(kind),
                "refused, but not as a bad address: {kind:?}"
            );
            // The driver's own refusal: the runtime was never called.
            let native = kind.driver_error().and_then(|e| e.native());
            assert!(native.is_none(), "{native:?}");
        }
        Ok(()) => panic!(
            "driver A's launch naming driver B's buffer was accepted; {} of B's bytes changed",
            outcome.changed
        ),
    }
    assert_eq!(outcome.changed, 0, "B's buffer is untouched");
}

/// The negative control: the same adapter naming driver A's own buffer.
#[test]
fn the_same_adapter_naming_its_own_drivers_buffer_runs() {
    let (a, b) = two_on_one();
    let outcome = run_with_borrowed_handshake(a, b, Whose::Own);
    assert!(outcome.launch.is_ok(), "{:?}", outcome.launch);
    assert!(
        outcome.changed > 0,
        "the handshake was written in the named buffer"
    );
}
