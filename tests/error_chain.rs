//! An error's message says everything once: `source()` does not repeat
//! what the message already holds, so a chain printer (anyhow's `{:#}`,
//! `Error::sources`-style loops) prints each cause once.

use runclaim::driver::Driver;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};

/// Every message of `e`'s chain, outermost first.
fn chain(e: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut at = e.source();
    while let Some(s) = at {
        out.push(s.to_string());
        at = s.source();
    }
    out
}

/// No message of the chain is contained in the one before it (negative
/// control: the chain as it was, the kind's message repeated as the
/// source, is caught).
fn no_repeats(links: &[String]) -> Result<(), String> {
    for pair in links.windows(2) {
        if pair[0].contains(pair[1].as_str()) {
            return Err(format!("{:?} repeats {:?}", pair[0], pair[1]));
        }
    }
    Ok(())
}

#[test]
fn a_faulted_fence_says_its_cause_once() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("inc").unwrap();
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicpu,
        nth: 1,
    });
    let run = runner
        .prepare(
            runner.take_slot::<0>().unwrap(),
            RunSpec::new(code, Input::Host(&[1])),
        )
        .unwrap()
        .launch()
        .unwrap();
    let e = run.fence().unwrap_err().without_value();
    let links = chain(&e);
    no_repeats(&links).unwrap();
    assert!(links[0].contains("fault"), "{links:?}");
    // The driver's error alone, likewise.
    let d = sim
        .copy_to_device(runclaim::driver::DevPtr::from_raw(0xdead_0000), &[1])
        .unwrap_err();
    no_repeats(&chain(&d)).unwrap();
    // The negative control: a chain whose source repeats its message.
    let repeated = [links[0].clone(), e.kind().to_string()];
    assert!(no_repeats(&repeated).is_err(), "{repeated:?}");
}
