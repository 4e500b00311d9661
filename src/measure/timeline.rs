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
const SLOT_COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders the first `window` runs (by device start) of each section on one
/// shared time scale, so the sections' gaps compare at a glance.
#[must_use]
#[allow(clippy::too_many_lines, reason = "one straight-line drawing routine")]
pub fn svg(sections: &[Section<'_>], window: usize) -> String {
    let windows: Vec<Vec<WallRecord>> = sections
        .iter()
        .map(|s| {
            let mut w = s.walls.to_vec();
            w.sort_by_key(WallRecord::start);
            w.truncate(window.max(1));
            w
        })
        .collect();
    let span_ticks = windows
        .iter()
        .filter_map(|w| Some(w.iter().map(|r| r.end).max()? - w.first()?.start()))
        .max()
        .unwrap_or(1)
        .max(1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let height = 40.0 + SECTION_H * sections.len() as f64 + 30.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="20" font-size="13" font-weight="bold">Device timeline: first {} runs of each mode, same time scale (colour = slot, red = device idle)</text>"#,
        window.max(1)
    );
    for (si, (section, walls)) in sections.iter().zip(&windows).enumerate() {
        let top = 40.0 + SECTION_H * si as f64;
        let _ = writeln!(
            o,
            r#"<text x="4" y="{}" font-size="13" font-weight="bold">{}</text>"#,
            top + 12.0,
            esc(section.title)
        );
        let Some(t0) = walls.first().map(WallRecord::start) else {
            continue;
        };
        let x = |t: u64| LEFT + (t.saturating_sub(t0)) as f64 / span_ticks as f64 * plot_w;
        for (li, lane) in ["AICore", "AICPU"].iter().enumerate() {
            let y = top + 22.0 + li as f64 * (LANE_H + 8.0);
            let _ = writeln!(
                o,
                r##"<text x="4" y="{}">{lane}</text><rect x="{LEFT}" y="{y}" width="{plot_w}" height="{LANE_H}" fill="#f4f4f4"/>"##,
                y + LANE_H / 2.0 + 4.0
            );
            for (i, w) in walls.iter().enumerate() {
                let start = if li == 0 {
                    w.aicore_start
                } else {
                    w.aicpu_start
                };
                let (x0, x1) = (x(start), x(w.end));
                let colour = SLOT_COLOURS[w.slot as usize % SLOT_COLOURS.len()];
                let _ = writeln!(
                    o,
                    r#"<rect x="{x0:.2}" y="{y}" width="{:.2}" height="{LANE_H}" fill="{colour}" stroke="white" stroke-width="0.5"><title>run {} slot {}</title></rect>"#,
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
                // The idle gap before the next run, shaded on both lanes.
                if let Some(next) = walls.get(i + 1)
                    && next.start() > w.end
                {
                    let (g0, g1) = (x(w.end), x(next.start()));
                    let _ = writeln!(
                        o,
                        r##"<rect x="{g0:.2}" y="{y}" width="{:.2}" height="{LANE_H}" fill="#e15759" opacity="0.35"/>"##,
                        (g1 - g0).max(0.5)
                    );
                    if li == 0 {
                        let gap_us = (next.start() - w.end) as f64 * NANOS_PER_TICK as f64 / 1000.0;
                        let _ = writeln!(
                            o,
                            r##"<text x="{:.2}" y="{}" fill="#c03030" text-anchor="middle">{gap_us:.0} µs</text>"##,
                            f64::midpoint(g0, g1),
                            y - 3.0
                        );
                    }
                }
            }
        }
    }
    // Time axis.
    let axis_y = 40.0 + SECTION_H * sections.len() as f64;
    let span_us = span_ticks as f64 * NANOS_PER_TICK as f64 / 1000.0;
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#333"/>"##,
        LEFT + plot_w
    );
    for k in 0..=10 {
        let xx = LEFT + plot_w * f64::from(k) / 10.0;
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.2}" y1="{axis_y}" x2="{xx:.2}" y2="{}" stroke="#333"/><text x="{xx:.2}" y="{}" text-anchor="middle">{:.0} µs</text>"##,
            axis_y + 4.0,
            axis_y + 16.0,
            span_us * f64::from(k) / 10.0
        );
    }
    o.push_str("</svg>\n");
    o
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
        assert_eq!(
            s.matches("opacity=\"0.35\"").count(),
            2,
            "one gap × 2 lanes"
        );
        assert!(s.contains("a&lt;b"));
        assert!(s.trim_end().ends_with("</svg>"));
        // An empty section draws nothing and does not panic.
        let e = svg(&[Section::new("empty", &[])], 4);
        assert!(e.contains("empty"));
    }
}
