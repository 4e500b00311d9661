//! Invariant checkers shared by the property tests, the fault sweep and the
//! negative controls. Each returns `Err` with what it found; a negative
//! control feeds each a deliberately broken case and requires the `Err`.

use runclaim::contract::{ErrorKind, Health};
use runclaim::sim::SimStats;
use runclaim::sim::trace::{TaskTag, TraceEvent, TraceKind};

/// Outputs equal the expected values.
pub fn outputs(run: u64, expected: &[u32], got: &[u32]) -> Result<(), String> {
    if expected == got {
        Ok(())
    } else {
        Err(format!("run #{run}: expected {expected:?}, got {got:?}"))
    }
}

/// Device order equals launch order, on both streams, as two facts of the
/// trace: (1) kernels of each kind were enqueued in launch order (and none
/// that was not launched); (2) on every stream, the kernels that started are
/// a prefix of those enqueued there (FIFO: none overtook another, none
/// started while one before it never did). `launched` is every run whose
/// kernel of that kind was submitted, in launch order.
pub fn device_order(
    trace: &[TraceEvent],
    launched_aicore: &[u64],
    launched_aicpu: &[u64],
) -> Result<(), String> {
    for (tag, launched) in [
        (TaskTag::Aicore, launched_aicore),
        (TaskTag::Aicpu, launched_aicpu),
    ] {
        let enqueued: Vec<(u64, u64)> = trace
            .iter()
            .filter(|t| t.what == TraceKind::Enqueued(tag))
            .map(|t| (t.stream.raw(), t.run))
            .collect();
        let order: Vec<u64> = enqueued.iter().map(|&(_, r)| r).collect();
        let expect: Vec<u64> = launched
            .iter()
            .copied()
            .filter(|r| order.contains(r))
            .collect();
        if order != expect {
            return Err(format!(
                "{tag:?} kernels enqueued in order {order:?}, launched in order {launched:?}"
            ));
        }
        let mut streams: Vec<u64> = enqueued.iter().map(|&(s, _)| s).collect();
        streams.dedup();
        for s in streams {
            let queue: Vec<u64> = enqueued.iter().filter(|e| e.0 == s).map(|e| e.1).collect();
            let started: Vec<u64> = trace
                .iter()
                .filter(|t| t.stream.raw() == s && t.what == TraceKind::Started(tag))
                .map(|t| t.run)
                .collect();
            if !queue.starts_with(&started) {
                return Err(format!(
                    "{tag:?} kernels on stream {s} started in order {started:?}, enqueued in order {queue:?}"
                ));
            }
        }
    }
    Ok(())
}

/// No AICore kernel executed stale code.
pub fn no_stale_code(stats: &SimStats) -> Result<(), String> {
    match stats.stale_executions {
        0 => Ok(()),
        n => Err(format!("{n} AICore kernel(s) executed stale code")),
    }
}

/// No stream with queued work reached destroy.
pub fn no_busy_destroy(stats: &SimStats) -> Result<(), String> {
    match stats.busy_destroy_refused {
        0 => Ok(()),
        n => Err(format!("{n} destroy(s) of a stream with queued work")),
    }
}

/// Nothing the device allocated is still alive.
pub fn no_leaks(stats: &SimStats) -> Result<(), String> {
    let (s, e, m) = (
        stats.live_streams(),
        stats.live_events(),
        stats.live_allocations(),
    );
    if (s, e, m) == (0, 0, 0) {
        Ok(())
    } else {
        Err(format!(
            "leaked {s} stream(s), {e} event(s), {m} allocation(s)"
        ))
    }
}

/// A wait stayed within its bound of device steps.
pub fn bounded(what: &str, steps: u64, bound: u64) -> Result<(), String> {
    if steps <= bound {
        Ok(())
    } else {
        Err(format!("{what} took {steps} device steps, bound {bound}"))
    }
}

/// An error is never a record mismatch: no device-wall or status record
/// carries another run's id.
pub fn own_records(kind: &ErrorKind) -> Result<(), String> {
    match kind {
        ErrorKind::RecordMismatch { .. } | ErrorKind::RecordMissing(_) => {
            Err(format!("a record of another run: {kind}"))
        }
        _ => Ok(()),
    }
}

/// The device's run-time state is the model's.
pub fn health(
    h: &Health,
    poisoned: bool,
    in_flight: usize,
    quarantined: &[usize],
) -> Result<(), String> {
    let q: Vec<usize> = h.quarantined.iter().collect();
    if h.poisoned.is_some() == poisoned && h.in_flight == in_flight && q == quarantined {
        Ok(())
    } else {
        Err(format!(
            "health {h:?}; model: poisoned {poisoned}, {in_flight} in flight, quarantined {quarantined:?}"
        ))
    }
}

/// Whether consecutive launched runs `a` then `b` overlapped on the streams:
/// `b`'s AICore kernel was enqueued before `a`'s fence record finished.
/// `None` when the trace lacks either entry — a skipped check, which callers
/// treat as a failure.
pub fn overlapped(trace: &[TraceEvent], a: u64, b: u64) -> Option<bool> {
    let enq_b = trace
        .iter()
        .position(|t| t.run == b && t.what == TraceKind::Enqueued(TaskTag::Aicore))?;
    let aicpu = trace
        .iter()
        .find(|t| t.run == a && t.what == TraceKind::Enqueued(TaskTag::Aicpu))?
        .stream;
    let done_a = trace.iter().position(|t| {
        t.run == a && t.stream == aicpu && matches!(t.what, TraceKind::Finished(TaskTag::Record(_)))
    })?;
    Some(enq_b < done_a)
}
