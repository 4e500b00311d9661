#![allow(dead_code, reason = "each example uses a subset")]

//! Quantiles of sorted latencies, in µs for printing: what the async
//! examples report.

use std::time::Duration;

/// The `p` quantile of `v` (sorted), rounded to the nearest sample; zero
/// for an empty `v`.
pub fn quantile(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "an index into a non-empty vector, rounded"
    )]
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// `d` in microseconds.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
