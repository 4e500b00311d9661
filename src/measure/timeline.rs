//! An SVG picture of device-wall records: for each section (e.g. serial,
//! then queued) the AICore and AICPU streams as lanes over device time, runs
//! coloured by slot, idle gaps shaded and labelled.
//!
//! ```
//! use runclaim::driver::abi::WallRecord;
//! use runclaim::measure::timeline::{Section, svg};
//!
//! let run = |id: u64, slot: u32, start: u64| WallRecord {
//!     run_id: id, slot, aicore_start: start, aicpu_start: start + 10,
//!     dispatched: start + 20, end: start + 500, ..Default::default()
//! };
//! let serial = [run(1, 0, 0), run(2, 0, 2000)];
//! let queued = [run(1, 0, 0), run(2, 1, 520)];
//! let picture = svg(&[Section::new("serial", &serial), Section::new("queued", &queued)], 8);
//! assert!(picture.starts_with("<svg"));
//! assert!(picture.contains("queued"));
//! ```

use std::fmt::Write;

use crate::driver::abi::{NANOS_PER_TICK, WallRecord};

/// One titled group of runs.
///
/// ```
/// use runclaim::driver::abi::WallRecord;
/// use runclaim::measure::timeline::{Section, svg};
///
/// let walls = [WallRecord { run_id: 1, end: 100, ..Default::default() }];
/// assert!(svg(&[Section::new("one run", &walls)], 10).contains("one run"));
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Section<'a> {
    /// Shown above the lanes.
    pub title: &'a str,
    /// The runs' device-wall records, in any order.
    pub walls: &'a [WallRecord],
}

impl<'a> Section<'a> {
    /// A section.
    #[must_use]
    pub fn new(title: &'a str, walls: &'a [WallRecord]) -> Self {
        Section { title, walls }
    }
}

const WIDTH: f64 = 1100.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const LANE_H: f64 = 26.0;
const SECTION_H: f64 = 120.0;
/// Where the first section starts (below the title and the legend).
const TOP: f64 = 62.0;
/// The narrowest an idle gap is drawn, so a 2 µs gap still shows.
const MIN_GAP_PX: f64 = 3.0;
const IDLE: &str = "#d62728";
const SLOT_COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The first `window` runs of a section, by device start.
fn first_runs(walls: &[WallRecord], window: usize) -> Vec<WallRecord> {
    let mut w = walls.to_vec();
    w.sort_by_key(WallRecord::start);
    w.truncate(window.max(1));
    w
}

/// The idle gaps between consecutive runs, in ticks.
fn gaps(walls: &[WallRecord]) -> impl Iterator<Item = u64> + '_ {
    walls
        .windows(2)
        .map(|p| p[1].start().saturating_sub(p[0].end))
}

/// A round tick step (1, 2 or 5 × 10ⁿ µs) giving five to ten ticks over
/// `span_us`.
fn tick_step(span_us: f64) -> f64 {
    let raw = (span_us / 8.0).max(1e-3);
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * decade)
}

fn micros(ticks: u64) -> f64 {
    ticks as f64 * NANOS_PER_TICK as f64 / 1000.0
}

/// Renders the first `window` runs (by device start) of each section on one
/// shared time scale, so the sections' gaps compare at a glance: the AICore
/// and AICPU lanes, runs coloured by slot (a legend names the colours), the
/// device's idle gaps in red (drawn at least a few pixels wide, so even a
/// 2 µs gap shows) with the section's mean gap written beside its title, and
/// a time axis with round ticks. Never panics: records whose end precedes
/// their start are drawn empty.
#[must_use]
pub fn svg(sections: &[Section<'_>], window: usize) -> String {
    let windows: Vec<Vec<WallRecord>> = sections
        .iter()
        .map(|s| first_runs(s.walls, window))
        .collect();
    let scale = Scale::of(&windows);
    let axis_y = TOP + SECTION_H * sections.len() as f64;
    let height = axis_y + 48.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="20" font-size="13" font-weight="bold">Device timeline: the first {} runs of each mode, on one time scale</text>"#,
        window.max(1)
    );
    legend(&mut o, &windows);
    for (si, (section, walls)) in sections.iter().zip(&windows).enumerate() {
        draw_section(
            &mut o,
            section.title,
            walls,
            TOP + SECTION_H * si as f64,
            &scale,
        );
    }
    axis(&mut o, &scale, axis_y);
    o.push_str("</svg>\n");
    o
}

/// The one time scale every section is drawn on: the longest section's
/// span (at least a tick) over the plot's width.
struct Scale {
    span_ticks: u64,
    plot_w: f64,
}

impl Scale {
    fn of(windows: &[Vec<WallRecord>]) -> Self {
        let span_ticks = windows
            .iter()
            .filter_map(|w| {
                let end = w.iter().map(|r| r.end).max()?;
                Some(end.saturating_sub(w.first()?.start()))
            })
            .max()
            .unwrap_or(1)
            .max(1);
        Scale {
            span_ticks,
            plot_w: WIDTH - LEFT - RIGHT,
        }
    }

    /// Where device time `t` lies, in a section whose first run starts at
    /// `t0`.
    fn x(&self, t0: u64, t: u64) -> f64 {
        LEFT + t.saturating_sub(t0) as f64 / self.span_ticks as f64 * self.plot_w
    }
}

/// The legend: the slots whose runs appear, then idle.
fn legend(o: &mut String, windows: &[Vec<WallRecord>]) {
    let mut slots: Vec<u32> = windows.iter().flatten().map(|w| w.slot).collect();
    slots.sort_unstable();
    slots.dedup();
    let mut lx = LEFT;
    for slot in &slots {
        let colour = SLOT_COLOURS[*slot as usize % SLOT_COLOURS.len()];
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="32" width="14" height="12" fill="{colour}"/><text x="{}" y="42">run in slot {slot}</text>"#,
            lx + 18.0
        );
        lx += 96.0;
    }
    let _ = writeln!(
        o,
        r#"<rect x="{lx}" y="32" width="14" height="12" fill="{IDLE}"/><text x="{}" y="42">device idle between runs (drawn at least {MIN_GAP_PX} px wide)</text>"#,
        lx + 18.0
    );
}

/// One section at `top`: its title with its runs' mean idle gap, then the
/// AICore and AICPU lanes.
fn draw_section(o: &mut String, title: &str, walls: &[WallRecord], top: f64, scale: &Scale) {
    let gap_ticks: Vec<u64> = gaps(walls).collect();
    let mean_gap = if gap_ticks.is_empty() {
        String::new()
    } else {
        let sum: u128 = gap_ticks.iter().map(|&g| u128::from(g)).sum();
        let mean = u64::try_from(sum / gap_ticks.len() as u128).unwrap_or(u64::MAX);
        format!(" — mean idle gap of these runs: {:.1} µs", micros(mean))
    };
    let _ = writeln!(
        o,
        r#"<text x="4" y="{}" font-size="13"><tspan font-weight="bold">{}</tspan>{mean_gap}</text>"#,
        top + 6.0,
        esc(title)
    );
    let Some(t0) = walls.first().map(WallRecord::start) else {
        return;
    };
    let x = |t: u64| scale.x(t0, t);
    let lanes: [(&str, StartOf); 2] =
        [("AICore", |w| w.aicore_start), ("AICPU", |w| w.aicpu_start)];
    for (li, (lane, start_of)) in lanes.into_iter().enumerate() {
        let y = top + 30.0 + li as f64 * (LANE_H + 8.0);
        let _ = writeln!(
            o,
            r##"<text x="4" y="{}">{lane}</text><rect x="{LEFT}" y="{y}" width="{}" height="{LANE_H}" fill="#f4f4f4"/>"##,
            y + LANE_H / 2.0 + 4.0,
            scale.plot_w
        );
        lane_runs(o, walls, start_of, y, &x);
        // Gap labels on the first lane only.
        lane_gaps(o, walls, &gap_ticks, li == 0, y, &x);
    }
}

/// Where a run starts on one lane.
type StartOf = fn(&WallRecord) -> u64;

/// A lane's runs, each from its start on this lane (`start_of`) to its end.
fn lane_runs(
    o: &mut String,
    walls: &[WallRecord],
    start_of: StartOf,
    y: f64,
    x: &impl Fn(u64) -> f64,
) {
    for w in walls {
        let start = start_of(w);
        let (x0, x1) = (x(start), x(w.end.max(start)));
        let colour = SLOT_COLOURS[w.slot as usize % SLOT_COLOURS.len()];
        let _ = writeln!(
            o,
            r#"<rect x="{x0:.2}" y="{y}" width="{:.2}" height="{LANE_H}" fill="{colour}" stroke="black" stroke-opacity="0.25" stroke-width="0.5"><title>run {} slot {}</title></rect>"#,
            (x1 - x0).max(0.5),
            w.run_id,
            w.slot
        );
        if x1 - x0 > 28.0 {
            let _ = writeln!(
                o,
                r#"<text x="{:.2}" y="{}" fill="white">#{}</text>"#,
                x0 + 3.0,
                y + LANE_H / 2.0 + 4.0,
                w.run_id
            );
        }
    }
}

/// A lane's idle gaps (`gap_ticks`, one per pair of consecutive runs), on
/// top of its runs and never thinner than [`MIN_GAP_PX`]; `labelled`: each
/// gap's length written above it where the labels do not collide.
fn lane_gaps(
    o: &mut String,
    walls: &[WallRecord],
    gap_ticks: &[u64],
    labelled: bool,
    y: f64,
    x: &impl Fn(u64) -> f64,
) {
    let mut last_label = f64::NEG_INFINITY;
    for (pair, &gap) in walls.windows(2).zip(gap_ticks) {
        let (end, next) = (pair[0].end, pair[1].start());
        if next <= end {
            continue;
        }
        let (g0, g1) = (x(end), x(next));
        let mid = f64::midpoint(g0, g1);
        let width = (g1 - g0).max(MIN_GAP_PX);
        let _ = writeln!(
            o,
            r#"<rect x="{:.2}" y="{y}" width="{width:.2}" height="{LANE_H}" fill="{IDLE}" opacity="0.8"><title>idle {:.1} µs before run {}</title></rect>"#,
            mid - width / 2.0,
            micros(gap),
            pair[1].run_id
        );
        if labelled && mid - last_label > 44.0 {
            last_label = mid;
            let _ = writeln!(
                o,
                r#"<text x="{mid:.2}" y="{}" fill="{IDLE}" text-anchor="middle">{:.0} µs</text>"#,
                y - 3.0,
                micros(gap)
            );
        }
    }
}

/// The time axis at `axis_y`: round ticks over the scale's span, and a
/// title with the unit.
fn axis(o: &mut String, scale: &Scale, axis_y: f64) {
    let plot_w = scale.plot_w;
    let span_us = micros(scale.span_ticks);
    let step = tick_step(span_us);
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#333"/>"##,
        LEFT + plot_w
    );
    let mut k = 0u32;
    loop {
        let t = step * f64::from(k);
        if t > span_us * 1.0001 {
            break;
        }
        let xx = LEFT + t / span_us * plot_w;
        let label = if step < 1.0 {
            format!("{t:.1}")
        } else {
            format!("{t:.0}")
        };
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.2}" y1="{axis_y}" x2="{xx:.2}" y2="{}" stroke="#333"/><text x="{xx:.2}" y="{}" text-anchor="middle">{label}</text>"##,
            axis_y + 4.0,
            axis_y + 16.0
        );
        k += 1;
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">device time since each mode's first run (µs)</text>"#,
        LEFT + plot_w / 2.0,
        axis_y + 36.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_run_on_both_lanes_and_every_gap() {
        let run = |id: u64, start: u64| WallRecord {
            run_id: id,
            slot: (id % 2) as u32,
            aicore_start: start,
            aicpu_start: start,
            dispatched: start,
            end: start + 100,
            ..Default::default()
        };
        let walls = [run(1, 0), run(2, 150), run(3, 250)];
        let s = svg(&[Section::new("a<b", &walls)], 10);
        assert_eq!(s.matches("<title>run").count(), 6, "3 runs × 2 lanes");
        assert_eq!(s.matches("<title>idle").count(), 2, "one gap × 2 lanes");
        assert!(
            s.contains("mean idle gap of these runs: 0.5 µs"),
            "one 50-tick gap, one 0: mean 25 ticks"
        );
        assert!(s.contains("a&lt;b"));
        assert!(s.trim_end().ends_with("</svg>"));
        // An empty section draws nothing and does not panic.
        let e = svg(&[Section::new("empty", &[])], 4);
        assert!(e.contains("empty"));
    }

    #[test]
    fn a_two_microsecond_gap_is_drawn_visible_and_legended() {
        // 250 µs runs, 2 µs apart: 100 ticks of gap in 12,500-tick runs.
        let run = |id: u64, start: u64| WallRecord {
            run_id: id,
            slot: u32::try_from(id % 2).unwrap(),
            aicore_start: start,
            aicpu_start: start,
            dispatched: start,
            end: start + 12_500,
            ..Default::default()
        };
        let walls: Vec<_> = (0..12).map(|i| run(i, i * 12_600)).collect();
        let s = svg(&[Section::new("queued", &walls)], 12);
        let widths: Vec<f64> = s
            .lines()
            .filter(|l| l.contains("<title>idle"))
            .map(|l| {
                let w = l.split("width=\"").nth(1).unwrap();
                w[..w.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(widths.len(), 22, "11 gaps × 2 lanes");
        assert!(widths.iter().all(|&w| w >= MIN_GAP_PX), "{widths:?}");
        assert!(s.contains("run in slot 0") && s.contains("run in slot 1"));
        assert!(s.contains("device idle between runs"));
        assert!(s.contains("mean idle gap of these runs: 2.0 µs"));
        assert!(s.contains("(µs)"), "axis title with its unit");
    }

    #[test]
    fn ticks_are_round() {
        for (span, step) in [
            (3640.0, 500.0),
            (100.0, 20.0),
            (7.0, 1.0),
            (1e6, 200_000.0),
            (0.5, 0.1),
        ] {
            assert!(
                (tick_step(span) - step).abs() < 1e-9,
                "{span} → {}",
                tick_step(span)
            );
        }
    }

    #[test]
    fn garbage_records_do_not_panic() {
        let bad = WallRecord {
            run_id: 1,
            aicore_start: u64::MAX,
            aicpu_start: 5,
            end: 0,
            ..Default::default()
        };
        let s = svg(
            &[Section::new("bad", &[bad, bad, WallRecord::default()])],
            usize::MAX,
        );
        assert!(s.ends_with("</svg>\n"));
    }
}
