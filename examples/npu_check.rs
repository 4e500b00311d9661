//! What an NPU owner runs first: one line per runtime behaviour runclaim
//! relies on, checked on this machine's Ascend runtime with runtime tasks
//! alone (no kernel of runclaim's), and the idle gap between small tasks
//! run serially and queued — what queuing buys here.
//!
//! The runtime is found by the acl driver's search order
//! (`RUNCLAIM_LIBASCENDCL` / `RUNCLAIM_LIBRUNTIME`, `$ASCEND_HOME_PATH`,
//! `$ASCEND_TOOLKIT_HOME`, the default install roots, the system loader).
//! CI points both variables at the fake runtime library
//! (`target/debug/deps/libfake_acl.so`, with `RUNCLAIM_FAKE_MODE=realtime`
//! and `RUNCLAIM_FAKE_WATCHDOG_MS=500`, see `.ci/run`). Against the fake,
//! use its real-time mode: in stepped mode an enqueue blocked on a held
//! stream drives the simulated device to its watchdog, and
//! `stream.capacity` differs.
//!
//! ```text
//! cargo run --release --example npu_check [-- --device N --tasks N --bytes N]
//! ```
//!
//! Exits 1 when a `required` line differs (and prints what to report), 2
//! on bad arguments, 0 otherwise. Side effects, process-wide: the op
//! watchdog is set (1 s requested), an exception-info callback registered.

use std::process::ExitCode;

use runclaim::driver::acl::probe::{self, Need, ProbeConfig, Verdict};

fn config() -> Result<ProbeConfig, String> {
    let (mut device, mut tasks, mut bytes) = (0i32, 64usize, 4096usize);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().ok_or(format!("{a} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{a} {v}: {e}");
        match a.as_str() {
            "--device" => device = v.parse().map_err(bad)?,
            "--tasks" => tasks = v.parse().map_err(bad)?,
            "--bytes" => bytes = v.parse().map_err(bad)?,
            _ => return Err(format!("unknown argument {a} (--device, --tasks, --bytes)")),
        }
    }
    Ok(ProbeConfig::new(device).gap(tasks, bytes))
}

fn main() -> ExitCode {
    let cfg = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "runclaim {} runtime check, device {}",
        env!("CARGO_PKG_VERSION"),
        cfg.acl.device_id
    );
    println!("{:<11} {:<22} {:<13} evidence", "verdict", "check", "need");
    let lines = probe::run(&cfg);
    for l in &lines {
        println!("{l}");
    }
    let bad: Vec<_> = lines
        .iter()
        .filter(|l| l.need == Need::Required && l.verdict == Verdict::Differs)
        .collect();
    let count = |v: Verdict| lines.iter().filter(|l| l.verdict == v).count();
    println!(
        "{} ok, {} differ ({} required), {} unavailable",
        count(Verdict::Ok),
        count(Verdict::Differs),
        bad.len(),
        count(Verdict::Unavailable)
    );
    if bad.is_empty() {
        return ExitCode::SUCCESS;
    }
    println!();
    println!("runclaim relies on what the lines above marked 'differs required'. Please report");
    println!("(an issue with this whole output) the CANN version, the SoC and driver version");
    println!("(npu-smi info), and these lines:");
    for l in bad {
        println!("  {}: {}", l.name, l.evidence);
    }
    ExitCode::FAILURE
}
