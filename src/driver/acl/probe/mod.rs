//! The runtime check (`examples/npu_check.rs`): one line per runtime
//! behaviour runclaim relies on, measured on the runtime the driver's
//! search order finds (or the libraries an [`AclConfig`] names), with no
//! kernel of runclaim's — and the idle gap between small runtime tasks run
//! serially and queued. Hidden and outside semver: what it reports is for
//! a person, not for code.
//!
//! It loads the runtime through the driver's own search and symbol table
//! (so it sees exactly what [`AclDriver::open`](super::AclDriver::open)
//! would), initializes ACL, binds the device, and gives everything back at
//! the end. It calls the runtime directly: the behaviours it checks — a
//! stream wait on an event nothing recorded yet, a full stream, a callback
//! thread, `aclrtProcessReport` with no subscription, the op watchdog's
//! read-back — are exactly what [`Driver`](super::super::Driver) keeps
//! away from its users.
//!
//! Side effects, all process-wide and all ones a driver would make too: the
//! op watchdog is set (request 1 s), an exception-info callback is
//! registered (a no-op), and the device is bound and reset.
//!
//! Nothing in it hangs: every wait has a bound, the capacity check's
//! helper thread is given up (and its stream left to the runtime) when it
//! does not come back after the release.
//!
//! | file | checks |
//! |---|---|
//! | `mod.rs` | the lines, the runtime found, the symbols, the order of the checks |
//! | `raw.rs` | the runtime calls, with their contracts, and the handle guards |
//! | `queue.rs` | streams, the task capacity, events, memory |
//! | `host.rs` | callbacks, the exception-info callback, the op watchdog |
//! | `gap.rs` | capture, and the idle gap serial vs queued |

use std::fmt;
use std::time::Duration;

use super::codes;
use super::load::{self, Api, Lib, LoadError};
use super::{AclConfig, result};

mod gap;
mod host;
mod queue;
mod raw;

/// Whether runclaim depends on a line's behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The crate relies on it: a difference is a bug to report.
    Required,
    /// Reported for the record (a measurement, or a behaviour the driver
    /// has a fallback for).
    Informational,
}

/// What a line found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// As runclaim assumes.
    Ok,
    /// Not as runclaim assumes (the evidence says how).
    Differs,
    /// Could not be checked here (a call the runtime lacks, a check not
    /// built).
    Unavailable,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Ok => "ok",
            Verdict::Differs => "differs",
            Verdict::Unavailable => "unavailable",
        })
    }
}

/// One line of the check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// A stable name (`stream.capacity`, `event.unrecorded`, …).
    pub name: &'static str,
    /// Whether the crate relies on it.
    pub need: Need,
    /// What was found.
    pub verdict: Verdict,
    /// The values seen and codes returned.
    pub evidence: String,
}

impl Check {
    fn new(name: &'static str, need: Need, verdict: Verdict, evidence: impl Into<String>) -> Self {
        Check {
            name,
            need,
            verdict,
            evidence: evidence.into(),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let need = match self.need {
            Need::Required => "required",
            Need::Informational => "informational",
        };
        write!(
            f,
            "{:<11} {:<22} {:<13} {}",
            self.verdict.to_string(),
            self.name,
            need,
            self.evidence
        )
    }
}

/// What the check is run with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProbeConfig {
    /// The device and the library paths (the AICPU binary is not used).
    pub acl: AclConfig,
    /// Tasks in each idle-gap sequence (at least 2).
    pub gap_tasks: usize,
    /// Bytes each idle-gap memset writes.
    pub gap_bytes: usize,
    /// The most tasks the capacity check enqueues before it concludes the
    /// stream does not block.
    pub capacity_limit: usize,
    /// How long the helper must stay inside one enqueue for the capacity
    /// check to call it blocked.
    pub stall: Duration,
}

impl ProbeConfig {
    /// Device `device`, libraries by the driver's search order, 64 memsets
    /// of 4 KiB, up to 65,536 tasks (twice the runtime's largest stream
    /// queue, `STREAM_SQ_MAX_DEPTH`), a 20 ms stall.
    #[must_use]
    pub fn new(device: i32) -> Self {
        ProbeConfig {
            acl: AclConfig::new(device, ""),
            gap_tasks: 64,
            gap_bytes: 4096,
            capacity_limit: 65_536,
            stall: Duration::from_millis(20),
        }
    }

    /// Sets explicit library paths (each then the only one tried).
    #[must_use]
    pub fn libraries(
        mut self,
        ascendcl: impl Into<std::path::PathBuf>,
        runtime: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.acl = self.acl.libraries(ascendcl, runtime);
        self
    }

    /// Sets the idle-gap sequence: `tasks` memsets of `bytes` each.
    #[must_use]
    pub fn gap(mut self, tasks: usize, bytes: usize) -> Self {
        self.gap_tasks = tasks.max(2);
        self.gap_bytes = bytes.max(1);
        self
    }
}

/// Why a probe step could not go on: a code, a NULL handle, a missing
/// symbol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// A call returned a code other than 0.
    #[error("{api} returned {}", code_name(*.code))]
    Code {
        /// The C entry point.
        api: &'static str,
        /// Its code.
        code: i32,
    },
    /// A call succeeded and handed back NULL.
    #[error("{0} returned success and a NULL handle")]
    Null(&'static str),
    /// An optional symbol the step needs is absent.
    #[error("the runtime lacks {0}")]
    Missing(&'static str),
    /// A range outside an allocation (the check's own mistake).
    #[error("a range outside its allocation")]
    Range,
}

/// `code` with its name, where the code table knows it.
fn code_name(code: i32) -> String {
    match codes::name_of(code) {
        Some(n) => format!("{code} ({n})"),
        None => code.to_string(),
    }
}

/// A step that failed, as the line for `name`.
fn failed(name: &'static str, need: Need, e: &ProbeError) -> Check {
    let v = match e {
        ProbeError::Missing(_) => Verdict::Unavailable,
        _ => Verdict::Differs,
    };
    Check::new(name, need, v, e.to_string())
}

/// Runs every check; one line each, in a fixed order. Never panics; a
/// runtime that does not load is one `runtime` line that differs.
#[must_use]
pub fn run(cfg: &ProbeConfig) -> Vec<Check> {
    let env = |k: &str| std::env::var_os(k);
    let acl = load::open(Lib::AscendCl, cfg.acl.ascendcl.as_deref(), &env);
    let rt = load::open(Lib::Runtime, cfg.acl.runtime.as_deref(), &env);
    let api = match (acl, rt) {
        (Ok(acl), Ok(rt)) => Api::resolve(acl, rt),
        (Err(a), Err(r)) => Err(LoadError::Both {
            ascendcl: Box::new(a),
            runtime: Box::new(r),
        }),
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
    };
    let api = match api {
        Ok(api) => std::sync::Arc::new(api),
        Err(e) => {
            let verdict = Verdict::Differs;
            let mut out = vec![Check::new("runtime", Need::Required, verdict, one_line(&e))];
            if let LoadError::MissingSymbols { missing } = &e {
                let names: Vec<&str> = missing.iter().map(|m| m.symbol).collect();
                out.push(Check::new(
                    "symbols.required",
                    Need::Required,
                    Verdict::Differs,
                    format!("missing: {}", names.join(", ")),
                ));
            }
            return out;
        }
    };
    let device = cfg.acl.device_id;
    let mut out = Vec::new();
    if let Err(e) = result::init(&api) {
        out.push(Check::new(
            "runtime",
            Need::Required,
            Verdict::Differs,
            format!("aclInit: {e:?}"),
        ));
        return out;
    }
    if let Err(e) = raw::set_device(&api, device) {
        out.push(failed("runtime", Need::Required, &e));
        finalize(&api);
        return out;
    }
    out.push(runtime_line(&api, device));
    out.extend(symbol_lines(&api));
    out.extend(queue::checks(&api, device, cfg));
    out.extend(host::checks(&api, device));
    out.extend(gap::checks(&api, cfg));
    raw::reset_device(&api, device);
    finalize(&api);
    out
}

/// The load error on one line.
fn one_line(e: &LoadError) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Gives back the `aclInit` reference, where the runtime counts them.
fn finalize(api: &Api) {
    // SAFETY: `run` took the reference with `aclInit` and makes no call on
    // the runtime after this.
    let _ = unsafe { result::finalize_reference(api) };
}

/// Where the runtime was found, its version, devices and `SoC`.
fn runtime_line(api: &Api, device: i32) -> Check {
    let got = result::get_version(api);
    let old = matches!(got, Some(Ok((a, b, _))) if (a, b) < (1, 16));
    let version = match got {
        Some(Ok((a, b, c))) => format!("ACL {a}.{b}.{c}"),
        Some(Err(e)) => format!("aclrtGetVersion failed: {e:?}"),
        None => "version unknown (no aclrtGetVersion)".into(),
    };
    let count = api.get_device_count.map_or_else(
        || "device count unknown".to_owned(),
        |f| {
            let mut n = 0u32;
            // SAFETY: a valid out-pointer.
            match unsafe { f(&raw mut n) } {
                0 => format!("{n} device(s)"),
                c => format!("aclrtGetDeviceCount returned {}", code_name(c)),
            }
        },
    );
    let soc = api.get_soc_name.map_or_else(
        || "SoC unknown".to_owned(),
        |f| {
            // SAFETY: no arguments; NULL or a NUL-terminated string the
            // runtime keeps, copied at once.
            let p = unsafe { f() };
            if p.is_null() {
                "SoC name NULL".to_owned()
            } else {
                // SAFETY: non-NULL and NUL-terminated (above).
                let s = unsafe { std::ffi::CStr::from_ptr(p) };
                format!("SoC {}", s.to_string_lossy())
            }
        },
    );
    let verdict = if old { Verdict::Differs } else { Verdict::Ok };
    Check::new(
        "runtime",
        Need::Required,
        verdict,
        format!(
            "{} + {}; {version}{}; {count}; device {device} bound; {soc}",
            api.ascendcl_path.display(),
            api.runtime_path.display(),
            if old { " (runclaim needs 1.16+)" } else { "" },
        ),
    )
}

/// The required symbols (all resolved, or `run` stopped) and the optional
/// ones, present and absent.
fn symbol_lines(api: &Api) -> [Check; 2] {
    let present = api.present_optional();
    let absent: Vec<&str> = Api::OPTIONAL
        .iter()
        .copied()
        .filter(|s| !present.contains(s))
        .collect();
    [
        Check::new(
            "symbols.required",
            Need::Required,
            Verdict::Ok,
            format!("all {} resolved", Api::REQUIRED.len()),
        ),
        Check::new(
            "symbols.optional",
            Need::Informational,
            Verdict::Ok,
            format!(
                "{} of {} present; absent: {}",
                present.len(),
                Api::OPTIONAL.len(),
                if absent.is_empty() {
                    "none".to_owned()
                } else {
                    absent.join(", ")
                }
            ),
        ),
    ]
}
