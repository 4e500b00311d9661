#![allow(dead_code, reason = "each example uses a subset")]

//! CPU time of this process, from Linux's `/proc` (no dependency): what
//! the async examples print to show that an awaiting thread burns none.
//! Every reader answers `None` where `/proc` is not there.

use std::time::Duration;

/// CPU time of the whole process (every thread, exited ones included), from
/// `/proc/self/stat` (utime + stime, in the kernel's `USER_HZ` = 100 ticks);
/// `None` off Linux.
pub fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name, which may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// CPU time of the live threads of this process, to the nanosecond, from
/// `/proc/self/task/*/schedstat`; `None` where unavailable. (Finer than
/// [`process_cpu`], but it forgets threads that have exited: use it for a
/// phase during which no thread exits.)
pub fn threads_cpu() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path().join("schedstat");
        let s = std::fs::read_to_string(path).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// `cpu` as a share of `wall`, for printing ("n/a" when unknown).
pub fn percent(cpu: Option<Duration>, wall: Duration) -> String {
    cpu.map_or_else(
        || "n/a".to_string(),
        |c| format!("{:.1} %", 100.0 * c.as_secs_f64() / wall.as_secs_f64()),
    )
}

/// `b − a` (`None` when either is unknown).
pub fn since(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    Some(b?.saturating_sub(a?))
}
