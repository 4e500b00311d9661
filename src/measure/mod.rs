//! What queuing buys, measured from the device's own clock.
//!
//! Every finalized run hands back its validated [`WallRecord`]: device
//! timestamps (ticks of the 50 MHz counter) for when its kernels started and
//! when it ended. From a sequence of them, [`Report::from_walls`] computes
//! the **device idle gap** between consecutive runs, `start(N+1) − end(N)`
//! (differenced as integer ticks before conversion), how busy the device
//! was, and the throughput against the **device-bound limit** — the rate if
//! runs followed each other with no gap at all.
//!
//! It is library API: run it on your own runs, on the simulator or an NPU.
//!
//! ```
//! use runclaim::driver::abi::WallRecord;
//! use runclaim::measure::Report;
//!
//! // Three 10 µs runs (500 ticks) with 1 µs and 3 µs idle between them.
//! let run = |start: u64| WallRecord { run_id: start, aicore_start: start, aicpu_start: start,
//!                                     dispatched: start, end: start + 500, ..Default::default() };
//! let r = Report::from_walls(&[run(0), run(550), run(1200)]).unwrap();
//! assert_eq!(r.runs, 3);
//! assert_eq!(r.gap.mean_ns, 2_000);
//! assert_eq!(r.gap.max_ns, 3_000);
//! assert!((r.busy_fraction - 1500.0 / 1700.0).abs() < 1e-9);
//! ```

pub mod timeline;

use std::fmt;

use crate::driver::abi::{WallRecord, ticks_to_nanos};

/// Order statistics of a set of durations, in nanoseconds.
///
/// ```
/// use runclaim::measure::Summary;
///
/// let s = Summary::of(&mut [30, 10, 20]);
/// assert_eq!((s.count, s.mean_ns, s.p50_ns, s.max_ns), (3, 20, 20, 30));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// How many values.
    pub count: usize,
    /// Arithmetic mean (rounded down).
    pub mean_ns: u64,
    /// Median (nearest rank).
    pub p50_ns: u64,
    /// 99th percentile (nearest rank).
    pub p99_ns: u64,
    /// Largest value.
    pub max_ns: u64,
}

impl Summary {
    /// Summarizes `values_ns` (sorted in place).
    pub fn of(values_ns: &mut [u64]) -> Self {
        if values_ns.is_empty() {
            return Summary::default();
        }
        values_ns.sort_unstable();
        let n = values_ns.len();
        let rank = |p: usize| values_ns[((p * n).div_ceil(100)).clamp(1, n) - 1];
        let sum: u128 = values_ns.iter().map(|&v| u128::from(v)).sum();
        Summary {
            count: n,
            mean_ns: u64::try_from(sum / n as u128).unwrap_or(u64::MAX),
            p50_ns: rank(50),
            p99_ns: rank(99),
            max_ns: values_ns[n - 1],
        }
    }
}

/// Why a set of device-wall records cannot be analyzed.
///
/// ```
/// use runclaim::driver::abi::WallRecord;
/// use runclaim::measure::{MeasureError, Report};
///
/// assert_eq!(Report::from_walls(&[WallRecord::default()]), Err(MeasureError::TooFewRuns(1)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MeasureError {
    /// Fewer than two runs: there is no gap to measure.
    #[error("need at least two runs, got {0}")]
    TooFewRuns(usize),
    /// A record ends before it starts (never written, or corrupted).
    #[error("record of run {run_id} ends before it starts")]
    Inverted {
        /// The run.
        run_id: u64,
    },
}

/// The device-side picture of a sequence of runs.
///
/// ```
/// use runclaim::driver::abi::WallRecord;
/// use runclaim::measure::Report;
///
/// let run = |start: u64| WallRecord { aicore_start: start, aicpu_start: start, end: start + 100, ..Default::default() };
/// let r = Report::from_walls(&[run(0), run(100), run(200)])?; // back to back
/// assert_eq!(r.gap.max_ns, 0);
/// assert!((r.of_device_bound() - 1.0).abs() < 1e-9);
/// # Ok::<(), runclaim::measure::MeasureError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// Runs analyzed.
    pub runs: usize,
    /// Idle gaps between consecutive runs, `start(N+1) − end(N)` (runs whose
    /// records overlap count as a zero gap, see `overlaps`).
    pub gap: Summary,
    /// Consecutive pairs whose device windows overlapped.
    pub overlaps: usize,
    /// Device time from the first start to the last end, ns.
    pub span_ns: u64,
    /// Sum of the runs' own device times, ns.
    pub busy_ns: u64,
    /// `busy_ns / span_ns`.
    pub busy_fraction: f64,
    /// Runs per second of device time (`runs / span`).
    pub throughput: f64,
    /// Runs per second if runs followed each other with no gap
    /// (`runs / busy`): the device-bound limit.
    pub device_bound: f64,
}

impl Report {
    /// Analyzes device-wall records, in any order: they are sorted by device
    /// start time (stream order) first.
    ///
    /// # Errors
    /// [`MeasureError`] for fewer than two records or an inverted record.
    pub fn from_walls(walls: &[WallRecord]) -> Result<Self, MeasureError> {
        if walls.len() < 2 {
            return Err(MeasureError::TooFewRuns(walls.len()));
        }
        if let Some(w) = walls.iter().find(|w| w.end < w.start()) {
            return Err(MeasureError::Inverted { run_id: w.run_id });
        }
        let mut sorted = walls.to_vec();
        sorted.sort_by_key(WallRecord::start);
        let mut gaps = Vec::with_capacity(sorted.len() - 1);
        let mut overlaps = 0;
        for p in sorted.windows(2) {
            // Integer ticks first; only the difference is converted.
            let gap = i128::from(p[1].start()) - i128::from(p[0].end);
            if gap < 0 {
                overlaps += 1;
            }
            gaps.push(ticks_to_nanos(
                u64::try_from(gap.max(0)).unwrap_or(u64::MAX),
            ));
        }
        let first = sorted[0].start();
        let last = sorted.iter().map(|w| w.end).max().unwrap_or(first);
        let span_ns = ticks_to_nanos(last.saturating_sub(first));
        // Saturating: records from a corrupt device must not overflow.
        let busy_ns: u64 = sorted
            .iter()
            .map(|w| ticks_to_nanos(w.duration_ticks()))
            .fold(0, u64::saturating_add);
        let per_sec = |ns: u64| {
            if ns == 0 {
                0.0
            } else {
                sorted.len() as f64 / (ns as f64 / 1e9)
            }
        };
        Ok(Report {
            runs: sorted.len(),
            gap: Summary::of(&mut gaps),
            overlaps,
            span_ns,
            busy_ns,
            busy_fraction: if span_ns == 0 {
                0.0
            } else {
                busy_ns as f64 / span_ns as f64
            },
            throughput: per_sec(span_ns),
            device_bound: per_sec(busy_ns),
        })
    }

    /// Throughput as a fraction of the device-bound limit.
    #[must_use]
    pub fn of_device_bound(&self) -> f64 {
        if self.device_bound == 0.0 {
            0.0
        } else {
            self.throughput / self.device_bound
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |ns: u64| ns as f64 / 1000.0;
        write!(
            f,
            "{} runs, gap mean {:.1} µs p50 {:.1} p99 {:.1} max {:.1}, busy {:.1}%, {:.0} runs/s ({:.1}% of device-bound)",
            self.runs,
            us(self.gap.mean_ns),
            us(self.gap.p50_ns),
            us(self.gap.p99_ns),
            us(self.gap.max_ns),
            self.busy_fraction * 100.0,
            self.throughput,
            self.of_device_bound() * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(run_id: u64, start: u64, end: u64) -> WallRecord {
        WallRecord {
            run_id,
            aicore_start: start,
            aicpu_start: start + 1,
            dispatched: start + 2,
            end,
            ..Default::default()
        }
    }

    #[test]
    fn extreme_records_saturate_instead_of_overflowing() {
        let far = WallRecord {
            run_id: 2,
            aicore_start: u64::MAX - 1,
            aicpu_start: u64::MAX - 1,
            dispatched: u64::MAX - 1,
            end: u64::MAX,
            ..Default::default()
        };
        let whole = WallRecord {
            run_id: 1,
            end: u64::MAX - 2,
            ..Default::default()
        };
        let r = Report::from_walls(&[whole, far]).unwrap();
        assert_eq!((r.span_ns, r.busy_ns), (u64::MAX, u64::MAX));
        assert_eq!(r.gap.max_ns, 20);
    }

    #[test]
    fn gaps_are_differenced_in_ticks_and_sorted_by_start() {
        // Given out of order; 1 tick = 20 ns.
        let r = Report::from_walls(&[w(2, 110, 200), w(1, 0, 100), w(3, 203, 300)]).unwrap();
        assert_eq!(r.gap.count, 2);
        assert_eq!((r.gap.mean_ns, r.gap.max_ns), (130, 200));
        assert_eq!(r.span_ns, 300 * 20);
        assert_eq!(r.busy_ns, (100 + 90 + 97) * 20);
        assert_eq!(r.overlaps, 0);
    }

    #[test]
    fn overlap_counts_and_clamps() {
        let r = Report::from_walls(&[w(1, 0, 100), w(2, 90, 150)]).unwrap();
        assert_eq!((r.overlaps, r.gap.max_ns), (1, 0));
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).collect();
        let s = Summary::of(&mut v);
        assert_eq!((s.p50_ns, s.p99_ns, s.max_ns, s.mean_ns), (50, 99, 100, 50));
        assert_eq!(Summary::of(&mut [7]).p99_ns, 7);
        assert_eq!(Summary::of(&mut []).count, 0);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(
            Report::from_walls(&[w(1, 0, 1)]),
            Err(MeasureError::TooFewRuns(1))
        );
        assert_eq!(
            Report::from_walls(&[w(1, 0, 1), w(2, 10, 5)]),
            Err(MeasureError::Inverted { run_id: 2 })
        );
    }

    #[test]
    fn back_to_back_runs_reach_the_device_bound() {
        let walls: Vec<_> = (0..10).map(|i| w(i, i * 100, i * 100 + 100)).collect();
        let r = Report::from_walls(&walls).unwrap();
        assert_eq!(r.gap.max_ns, 0);
        assert!((r.of_device_bound() - 1.0).abs() < 1e-12);
    }
}
