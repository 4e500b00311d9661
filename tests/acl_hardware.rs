//! Tests on a real Ascend NPU (CANN 8.5 or later) that need **kernels**:
//! everything that needs none — the runtime and its symbols, streams and
//! their task capacity, events, callbacks, the op watchdog, memory, capture
//! and the idle gap between runtime tasks — is the runtime check, which an
//! NPU owner runs first:
//!
//! ```sh
//! cargo run --release --example npu_check
//! ```
//!
//! Ignored by default; on an Ascend machine with the toolkit's
//! `setenv.bash` sourced:
//!
//! ```sh
//! RUNCLAIM_ACL_HARDWARE=1 \
//! RUNCLAIM_AICPU_BINARY=/path/to/runclaim_aicpu_op_info.json \
//! RUNCLAIM_AICORE_KERNEL=/path/to/runclaim_aicore.o \
//! cargo test --test acl_hardware -- --ignored --test-threads=1
//! ```
//!
//! | test | kernels it needs |
//! |---|---|
//! | `queued_runs_complete_with_their_own_records` | an AICore kernel (`RUNCLAIM_AICORE_KERNEL`, an ELF) and the AICPU Run kernel (`RUNCLAIM_AICPU_BINARY`, an op-info JSON; function `RUNCLAIM_AICPU_FUNCTION`, default `runclaim_aicpu_run`), both speaking the protocol `RUNCLAIM_KERNEL_ABI` names |
//!
//! The protocols are documented in `docs/kernels.md` ("What the hardware
//! tests need"): `RUNCLAIM_KERNEL_ABI=runclaim` (the default; runclaim's
//! `RunArgs` block, handshake, device-wall and status records,
//! `driver::abi::RunclaimAbi`) or `RUNCLAIM_KERNEL_ABI=a2a3` (the reference
//! runtime's layout, `driver::abi::A2a3Abi`). No kernel of either ships
//! with the crate. `RUNCLAIM_DEVICE` picks the device (default 0).

#![cfg(feature = "acl")]

use std::time::Duration;

use runclaim::driver::acl::{AclConfig, AclDriver};
use runclaim::measure::Report;
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

/// The driver, or `None` (with a note) when hardware tests are not enabled.
fn hardware() -> Option<AclDriver> {
    if std::env::var("RUNCLAIM_ACL_HARDWARE").as_deref() != Ok("1") {
        eprintln!("skipped: set RUNCLAIM_ACL_HARDWARE=1 on an Ascend machine");
        return None;
    }
    let binary = std::env::var("RUNCLAIM_AICPU_BINARY").expect("RUNCLAIM_AICPU_BINARY");
    let device =
        std::env::var("RUNCLAIM_DEVICE").map_or(0, |d| d.parse().expect("RUNCLAIM_DEVICE"));
    let mut cfg = AclConfig::new(device, binary).op_watchdog(Duration::from_secs(5));
    if let Ok(f) = std::env::var("RUNCLAIM_AICPU_FUNCTION") {
        cfg.aicpu_function = f;
    }
    Some(AclDriver::open(cfg).expect("open the Ascend runtime"))
}

/// The device configuration for the kernel ABI `RUNCLAIM_KERNEL_ABI` names.
fn config() -> DeviceConfig {
    match std::env::var("RUNCLAIM_KERNEL_ABI").as_deref() {
        Ok("a2a3") => DeviceConfig::default().kernel_abi(runclaim::driver::abi::A2a3Abi),
        Ok("runclaim") | Err(_) => DeviceConfig::default(),
        Ok(other) => panic!("RUNCLAIM_KERNEL_ABI: runclaim or a2a3, not {other:?}"),
    }
}

#[test]
#[ignore = "needs an Ascend NPU and kernels of the chosen ABI: see the file header"]
fn queued_runs_complete_with_their_own_records() {
    let Some(d) = hardware() else { return };
    let elf =
        std::fs::read(std::env::var("RUNCLAIM_AICORE_KERNEL").expect("RUNCLAIM_AICORE_KERNEL"))
            .expect("read the AICore kernel");
    let mut dev = Device::<_, 2>::open(d, config()).unwrap();
    let runner = dev.publish(&[Callable::new("k", elf)]).unwrap();
    let code = runner.code("k").unwrap();
    let input: Vec<u32> = (0..1024).collect();
    let (mut o0, mut o1) = (Outputs::<0>::new(1024), Outputs::<1>::new(1024));
    let (mut t0, mut t1) = (
        runner.take_slot::<0>().unwrap(),
        runner.take_slot::<1>().unwrap(),
    );
    let mut walls = Vec::new();
    for _ in 0..50 {
        let r0 = runner
            .prepare(t0, RunSpec::new(code, Input::Host(&input)))
            .unwrap()
            .launch()
            .unwrap();
        let r1 = runner
            .prepare(t1, RunSpec::new(code, Input::Host(&input)))
            .unwrap()
            .launch()
            .unwrap();
        let f0 = r0.fence().unwrap().finalize(&mut o0).unwrap();
        let f1 = r1.fence().unwrap().finalize(&mut o1).unwrap();
        walls.extend([f0.wall, f1.wall]);
        (t0, t1) = (f0.token, f1.token);
    }
    println!("{}", Report::from_walls(&walls).unwrap());
}
