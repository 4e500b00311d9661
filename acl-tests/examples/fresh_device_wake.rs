//! How soon a fresh device's first awaited run is woken, through the `acl`
//! driver over the fake runtime (real time): each of `--devices` devices
//! (default 100) is opened fresh — a new device id, so a new reactor
//! thread, which starts with nothing subscribed to it — and runs one
//! `--kernel-ms` kernel (default 20), awaited (`run.fence_async()`, one
//! `pollster::block_on`). The time from the launch to the awaited fence's
//! resolution is counted as woken in time when it is within twice the
//! kernel's time. A reactor that sleeps through the run's subscription
//! resolves it at its 100 ms wait instead.
//!
//! Prints the count (not judged: a measurement, not a test):
//!
//! ```text
//! cargo run -p acl-tests --release --example fresh_device_wake [-- --devices N --kernel-ms K]
//! ```

use std::error::Error;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fake_acl::control::FakeConfig;
use runclaim::driver::abi::Program;
use runclaim::driver::acl::{AclConfig, AclDriver};
use runclaim::sim::{LatencyModel, SimConfig};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

type Configure = unsafe extern "C" fn(i32, *const FakeConfig) -> i32;

/// The fake library cargo built beside this example (`target/<profile>/deps`).
fn fake_library() -> Result<PathBuf, Box<dyn Error>> {
    let exe = std::env::current_exe()?;
    let profile = exe
        .parent()
        .and_then(|examples| examples.parent())
        .ok_or("no target/<profile> above the example")?;
    let p = profile.join("deps").join("libfake_acl.so");
    if p.exists() {
        Ok(p)
    } else {
        Err(format!("{} is missing: build the acl-tests package", p.display()).into())
    }
}

fn args() -> Result<(u32, u64), Box<dyn Error>> {
    let (mut devices, mut kernel_ms) = (100, 20);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--devices" => devices = v.parse()?,
            "--kernel-ms" => kernel_ms = v.parse()?,
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    Ok((devices, kernel_ms))
}

/// Opens device `id` fresh and awaits its first run; the time from the
/// launch to the resolved fence.
fn first_run(
    path: &PathBuf,
    configure: Configure,
    id: i32,
    kernel: Duration,
) -> Result<Duration, Box<dyn Error>> {
    let sim = SimConfig::default()
        .watchdog(Duration::from_secs(5))
        .latency(LatencyModel::default().kernel(kernel));
    let cfg = FakeConfig::from_sim(&sim, true);
    // SAFETY: `cfg` is a valid FakeConfig for the call.
    let rc = unsafe { configure(id, &raw const cfg) };
    if rc != 0 {
        return Err(format!("runclaim_fake_configure: {rc}").into());
    }
    let acl = AclConfig::new(id, "fake-aicpu-op-info.json")
        .libraries(path, path)
        .op_watchdog(sim.watchdog);
    // Each failure as text: a contract error hands back its run, which
    // borrows the runner.
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let mut dev = Device::<_, 2>::open(AclDriver::open(acl)?, DeviceConfig::default())
        .map_err(|e| text(&e))?;
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .map_err(|e| text(&e))?;
    let code = runner.code("f").map_err(|e| text(&e))?;
    let slot = runner.take_slot::<0>().map_err(|e| text(&e))?;
    let start = Instant::now();
    let run = runner
        .prepare(slot, RunSpec::new(code, Input::Host(&[41])))
        .map_err(|e| text(&e))?
        .launch()
        .map_err(|e| text(&e))?;
    let fenced = pollster::block_on(run.fence_async()).map_err(|e| text(&e))?;
    let took = start.elapsed();
    let mut out = Outputs::<0>::new(1);
    fenced.finalize(&mut out).map_err(|e| text(&e))?;
    if out.values() != [42] {
        return Err(format!("device {id}: {:?}, not [42]", out.values()).into());
    }
    Ok(took)
}

fn main() -> Result<(), Box<dyn Error>> {
    let (devices, kernel_ms) = args()?;
    let kernel = Duration::from_millis(kernel_ms);
    let path = fake_library()?;
    // SAFETY: the workspace's own fake library; the driver loads the same
    // path (one handle), and the symbol's type is its definition's.
    let lib = unsafe { libloading::Library::new(path.as_os_str())? };
    // SAFETY: as above.
    let configure = unsafe { *lib.get::<Configure>(b"runclaim_fake_configure")? };
    let mut took = Vec::new();
    for i in 0..devices {
        let id = 5000 + i32::try_from(i)?;
        took.push(first_run(&path, configure, id, kernel)?);
    }
    let bound = kernel * 2;
    let in_time = took.iter().filter(|&&t| t <= bound).count();
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "fresh devices: {in_time} of {devices} had their first awaited run woken within 2 × the {kernel_ms} ms kernel ({:.0} ms); \
         median {:.1} ms, slowest {:.1} ms",
        ms(bound),
        ms(took[took.len() / 2]),
        ms(*took.last().unwrap_or(&Duration::ZERO)),
    );
    Ok(())
}
